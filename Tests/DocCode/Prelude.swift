// The names the documentation's code examples take as given, for Scripts/doccode: a module of
// its own (DocPrelude), so that an example may declare any of them again. Nothing here runs;
// each value only has to type-check.
public import Able
public import AbleDBus
public import AbleSimulator

/// Stands for a value an example got earlier; never called.
private func given<T>() -> T { fatalError("documentation examples are type-checked, not run") }

public let adapter: Adapter = given()
public let peripheral: Peripheral = given()
public let device: Discovery = given()
public let discovery: Discovery = given()
public let server: GATTServer = given()
public let listener: L2CAPListener = given()
public let channel: L2CAPChannel = given()
public let psm: PSM = given()
public let radio: SimulatedRadio = given()
public let bus: DBusConnection = given()
public let serviceID: BluetoothUUID = "0C5E8F00-6A1D-4C43-9E4B-3D1A0E6C1A01"
public let psmID: BluetoothUUID = "0C5E8F01-6A1D-4C43-9E4B-3D1A0E6C1A01"

/// Services the examples name.
public enum Services: String, ServiceIdentifier {
    case heartRate = "180D"
    case battery = "180F"
    case environment = "181A"
}

/// Characteristics the examples name.
public enum Characteristics: String, CharacteristicIdentifier {
    case heartRate = "2A37"
    case measurement = "2a37"  // the same characteristic as heartRate, by its other name
    case bodySensorLocation = "2A38"
    case batteryLevel = "2A19"
    case temperature = "2A6E"
    case psm = "0C5E8F01-6A1D-4C43-9E4B-3D1A0E6C1A01"
    case setpoint = "0C5E8F02-6A1D-4C43-9E4B-3D1A0E6C1A01"
    case log = "0C5E8F03-6A1D-4C43-9E4B-3D1A0E6C1A01"

    public var service: any ServiceIdentifier {
        switch self {
        case .heartRate, .measurement, .bodySensorLocation: Services.heartRate
        case .batteryLevel: Services.battery
        case .temperature: Services.environment
        case .psm, .setpoint, .log: ServiceID(serviceID)
        }
    }
}

public let psmUUID: BluetoothUUID = "0C5E8F01-6A1D-4C43-9E4B-3D1A0E6C1A01"

/// Serves an L2CAP channel, as an app would.
public func serve(_ channel: L2CAPChannel) async throws {}
/// Publishes a PSM, for example through a characteristic.
public func publish(_ psm: PSM) {}
/// An app's answer to a packet.
public func reply(to packet: [UInt8]) -> [UInt8] { packet }

/// A sensor an app reads from.
public actor Sensor {
    public func temperature() async throws -> [UInt8] { [] }
}
public let sensor = Sensor()

/// A heater an app controls.
public actor Heater {
    public func set(_ value: [UInt8]) async throws {}
}
public let heater = Heater()

/// A log an app appends to from anywhere.
public final class Log: Sendable {
    public func append(_ value: [UInt8]) {}
}
public let log = Log()
