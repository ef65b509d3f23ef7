// A user's Swift Testing suite for an app that reads a heart-rate sensor, run on Able's
// simulated radio: no hardware, no daemon, no sleeping, and one injected fault.
//
// The app's code (`HeartRateMonitor`) is the code that ships: it takes any `Adapter`, so the
// tests hand it one from a `SimulatedRadio` and the app hands it `Adapter.default()`.
//
// This file is also a source of the `AbleSimulatorTests` target (through a symlink), so
// `swift test` runs these tests; `swift build` builds it as a snippet.
import Able
import AbleSimulator
import Testing

// MARK: The app

/// The Heart Rate service and its characteristics (Bluetooth SIG assigned numbers).
enum HeartRateService: String, ServiceIdentifier {
    case heartRate = "180D"
}

enum HeartRateCharacteristic: String, CharacteristicIdentifier {
    case measurement = "2A37"
    case bodySensorLocation = "2A38"
    var service: any ServiceIdentifier { HeartRateService.heartRate }
}

/// Finds a heart-rate sensor, and reads where it is worn and the next few beats per minute.
struct HeartRateMonitor {
    /// What went wrong, in the app's words.
    enum Failure: Error, Equatable {
        case noSensorFound
        case sensorLost
    }

    let adapter: Adapter

    /// Where the sensor is worn (0x02 wrist, 0x01 chest…) and the next `count` readings.
    func session(readings count: Int) async throws -> (location: UInt8, bpm: [Int]) {
        let sensor: Discovery
        do {
            sensor = try await adapter.scan(ScanFilter(serviceUUIDs: [HeartRateService.heartRate.uuid]))
                .first(timeout: .seconds(10))
        } catch let error as BluetoothError where error.code == .timeout {
            throw Failure.noSensorFound
        }
        do {
            return try await adapter.withConnection(to: sensor, timeout: .seconds(10)) { peripheral in
                let location = try await peripheral.read(HeartRateCharacteristic.bodySensorLocation)
                var bpm: [Int] = []
                for try await measurement in try await peripheral.notifications(of: HeartRateCharacteristic.measurement)
                    .prefix(count)
                {
                    bpm.append(Self.beatsPerMinute(in: measurement))
                }
                return (location.first ?? 0, bpm)
            }
        } catch let error as BluetoothError where error.code == .disconnected {
            throw Failure.sensorLost
        }
    }

    /// The heart rate of a Heart Rate Measurement: flags bit 0 says 8 or 16 bits.
    static func beatsPerMinute(in measurement: [UInt8]) -> Int {
        guard let flags = measurement.first else { return 0 }
        if flags & 0x01 == 0 { return measurement.count > 1 ? Int(measurement[1]) : 0 }
        return measurement.count > 2 ? Int(measurement[1]) | Int(measurement[2]) << 8 : 0
    }
}

// MARK: The app's tests

/// Each test gets a radio of its own: the sensor is an Able `GATTServer` on one simulated
/// adapter, advertising; the app gets another adapter of the same radio.
@Suite struct HeartRateMonitorTests {
    let radio = SimulatedRadio()
    let sensorAdapter: Adapter
    let server: GATTServer
    let advertising: AdvertisingSet

    init() async throws {
        let sensorAdapter = radio.makeAdapter(name: "sensor")
        self.sensorAdapter = sensorAdapter
        // The sensor runs on the radio, as the tests do, so that the radio's clock sees its work.
        (server, advertising) = try await radio.run {
            let server = try await GATTServer.start(on: sensorAdapter) {
                Service(HeartRateService.heartRate) {
                    Characteristic(HeartRateCharacteristic.measurement, properties: .notify)
                    Characteristic(HeartRateCharacteristic.bodySensorLocation, properties: .read, value: [0x01])
                }
                // The sensor starts beating as soon as the app subscribes.
                OnSubscriptionChange { server, _, _, isSubscribed in
                    guard isSubscribed else { return }
                    for bpm in [62, 64, 300] {
                        let value: [UInt8] =
                            bpm < 256 ? [0x00, UInt8(bpm)] : [0x01, UInt8(bpm & 0xFF), UInt8(bpm >> 8)]
                        try? await server.notify(HeartRateCharacteristic.measurement, value: value)
                    }
                }
            }
            let advertising = try await sensorAdapter.startAdvertising(
                Advertisement(localName: "HRM", serviceUUIDs: [HeartRateService.heartRate.uuid]))
            return (server, advertising)
        }
    }

    /// The sensor's handle on the radio, for injecting faults.
    func sensor() async throws -> SimulatedPeripheral {
        radio.peripheral(try #require(await sensorAdapter.state.address))
    }

    func finish() async {
        await advertising.stop()
        await server.close()
        #expect(radio.openResources.isEmpty)
    }

    @Test func readsTheLocationAndTheBeats() async throws {
        try await radio.run {
            let monitor = HeartRateMonitor(adapter: radio.makeAdapter())
            let session = try await monitor.session(readings: 3)
            #expect(session.location == 0x01)
            #expect(session.bpm == [62, 64, 300])
            await finish()
        }
    }

    @Test func aSensorThatDropsOutMidSessionIsReportedAsLost() async throws {
        try await radio.run {
            let monitor = HeartRateMonitor(adapter: radio.makeAdapter())
            // The injected fault: the link drops while the app's first read is in flight.
            try await sensor().dropLinkDuringNextRequest()
            await #expect(throws: HeartRateMonitor.Failure.sensorLost) { try await monitor.session(readings: 3) }
            await finish()
        }
    }

    @Test func noSensorInRangeIsReportedAfterTheScanTimesOut() async throws {
        try await radio.run {
            try await sensor().goOutOfRange()
            let monitor = HeartRateMonitor(adapter: radio.makeAdapter())
            let start = radio.clock.now
            await #expect(throws: HeartRateMonitor.Failure.noSensorFound) { try await monitor.session(readings: 1) }
            #expect(start.duration(to: radio.clock.now) == .seconds(10))  // ten simulated seconds, no real ones
            await finish()
        }
    }
}
