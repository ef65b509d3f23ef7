// A user's Swift Testing suite for a gateway app written against the system's adapter
// (`Adapter.default()`), tested unchanged on Able's simulated radio with the `.simulatedRadio`
// trait: the link drops mid-stream, the gateway reads the sensor's battery on every connection,
// and the radio's trace shows what happened, in simulated time.
//
// This file is also a source of the `AbleSimulatorTests` target (through a symlink), so
// `swift test` runs these tests; `swift build` builds it as a snippet.
import Able
import AbleSimulator
import AbleSimulatorTesting
import Testing

// MARK: The app

/// The sensor's characteristics: the standard Battery Level, and a vendor measurement.
enum GatewayCharacteristic: String, CharacteristicIdentifier {
    case batteryLevel = "2A19"
    case measurement = "A5C0F0A1-1D2A-4E3C-9F00-000000000001"

    var service: any ServiceIdentifier {
        switch self {
        case .batteryLevel: GatewayService.battery
        case .measurement: GatewayService.sensor
        }
    }
}

enum GatewayService: String, ServiceIdentifier {
    case battery = "180F"
    case sensor = "A5C0F0A1-1D2A-4E3C-9F00-000000000000"
}

/// Forwards a sensor's measurements: it connects through the system's default adapter, reads
/// the battery level on every connection, and reconnects when the link drops.
struct SensorGateway {
    /// What the gateway forwarded.
    struct Report: Equatable {
        var batteryLevels: [UInt8] = []
        var measurements: [UInt8] = []
        var linkDrops = 0
    }

    let sensor: BluetoothAddress

    /// Collects `count` measurements, across as many connections as it takes.
    func collect(_ count: Int) async throws -> Report {
        let adapter = try await Adapter.default()
        let peripheral = adapter.peripheral(address: sensor)
        var report = Report()
        while report.measurements.count < count {
            try await peripheral.connect(timeout: .seconds(5))
            do {
                report.batteryLevels.append(try await peripheral.read(GatewayCharacteristic.batteryLevel).first ?? 0)
                for try await value in try await peripheral.notifications(of: GatewayCharacteristic.measurement) {
                    report.measurements.append(value.first ?? 0)
                    if report.measurements.count == count { break }
                }
                try await peripheral.disconnect()
            } catch let error as BluetoothError where error.code == .disconnected {
                report.linkDrops += 1
            }
        }
        return report
    }
}

// MARK: The app's tests

/// The sensor, as each test's radio gets it.
let gatewaySensorAddress: BluetoothAddress = "00:00:00:00:00:0A"

extension SimulatedRadio {
    /// Adds the sensor the gateway forwards.
    @discardableResult
    func addGatewaySensor() -> SimulatedPeripheral {
        addPeripheral(address: gatewaySensorAddress, advertisement: Advertisement(localName: "Sensor")) {
            Service(GatewayService.battery) {
                Characteristic(GatewayCharacteristic.batteryLevel, properties: .read, value: [87])
            }
            Service(GatewayService.sensor) {
                Characteristic(GatewayCharacteristic.measurement, properties: .notify)
            }
        }
    }
}

@Suite struct SensorGatewayTests {
    /// The sensor's firmware: a measurement every 100 ms of simulated time, numbered from 1, and
    /// its link dropping (out of range for a moment) after measurement `dropAfter`.
    static func runSensor(_ sensor: SimulatedPeripheral, clock: SimulatedClock, dropAfter: UInt8) async throws {
        var number: UInt8 = 0
        while true {
            try await clock.sleep(for: .milliseconds(100))
            number &+= 1
            sensor.notify(GatewayCharacteristic.measurement, value: [number])
            if number == dropAfter { sensor.disconnectAll(reason: .linkTimeout) }
        }
    }

    @Test(.simulatedRadio { radio in radio.addGatewaySensor() })
    func readsTheBatteryOnEveryConnectionAndResumesAfterALinkDrop() async throws {
        let radio = try #require(SimulatedRadio.current)
        let sensor = radio.peripheral(gatewaySensorAddress)
        let report = try await withThrowingTaskGroup(of: SensorGateway.Report?.self) { group in
            group.addTask {
                try await Self.runSensor(sensor, clock: radio.clock, dropAfter: 3)
                return nil
            }
            group.addTask { try await SensorGateway(sensor: gatewaySensorAddress).collect(6) }
            defer { group.cancelAll() }
            return try await group.first { $0 != nil } ?? nil
        }
        #expect(report?.batteryLevels == [87, 87])
        #expect(report?.linkDrops == 1)
        // The measurements of each connection come in order; the ones sent while the link was
        // down are lost, as they are on a real link.
        let measurements = try #require(report?.measurements)
        #expect(measurements.count == 6)
        #expect(measurements == measurements.sorted())
        // The trace: two connections, the first ended by the link timing out.
        let trace = radio.trace
        #expect(trace.filter { $0.kind == .connected }.count == 2)
        #expect(trace.contains { $0.kind == .disconnected && $0.detail.hasSuffix("linkTimeout: the link timed out") })
        #expect(radio.openResources.isEmpty)
    }

    @Test(.simulatedRadio { radio in radio.addGatewaySensor() })
    func aSlowSensorTakesItsTimeForEachBatteryRead() async throws {
        let radio = try #require(SimulatedRadio.current)
        let sensor = radio.peripheral(gatewaySensorAddress)
        sensor.answerRequests(after: .milliseconds(300))
        let adapter = try await Adapter.default()
        let peripheral = adapter.peripheral(address: gatewaySensorAddress)
        try await peripheral.connect()
        let start = radio.clock.now
        #expect(try await peripheral.read(GatewayCharacteristic.batteryLevel) == [87])
        #expect(start.duration(to: radio.clock.now) == .milliseconds(300))
        try await peripheral.disconnect()
    }
}
