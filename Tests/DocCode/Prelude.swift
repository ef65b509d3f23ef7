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
    case bodySensorLocation = "2A38"
    case batteryLevel = "2A19"
    case temperature = "2A6E"
    case psm = "0C5E8F01-6A1D-4C43-9E4B-3D1A0E6C1A01"

    public var service: any ServiceIdentifier {
        switch self {
        case .heartRate, .bodySensorLocation: Services.heartRate
        case .batteryLevel: Services.battery
        case .temperature: Services.environment
        case .psm: BluetoothUUID("0C5E8F00-6A1D-4C43-9E4B-3D1A0E6C1A01")
        }
    }
}
