// Notifications: connect to a heart-rate sensor, take exactly five measurements, and leave
// nothing subscribed (StopNotify when the loop ends, Disconnect when the block ends).
//
// swift run Notifications [adapter]     on real BlueZ, with a heart-rate sensor in range
// swift run Notifications --simulated   against an Able GATT server on a simulated radio
import Able
import AbleSimulator

/// The heart rate in a Heart Rate Measurement: an 8-bit value, or 16-bit when flag bit 0 is set.
func beatsPerMinute(_ measurement: [UInt8]) -> Int? {
    guard let flags = measurement.first else { return nil }
    if flags & 1 == 0 { return measurement.count > 1 ? Int(measurement[1]) : nil }
    return measurement.count > 2 ? Int(measurement[1]) | Int(measurement[2]) << 8 : nil
}

let measurement = CharacteristicID(.heartRateMeasurement, service: .heartRate)
let argument = CommandLine.arguments.dropFirst().first
let adapter: Adapter
var sensor: (server: GATTServer, advertising: AdvertisingSet)?
if argument == "--simulated" {
    // The other end, written with Able too: a sensor that sends a measurement a subscriber asks for.
    let radio = SimulatedRadio()
    let sensorAdapter = radio.makeAdapter(name: "sensor")
    let server = try await GATTServer.start(on: sensorAdapter) {
        Service(.heartRate) { Characteristic(measurement, properties: .notify) }
        OnSubscriptionChange { server, _, _, isSubscribed in
            guard isSubscribed else { return }
            for bpm: UInt8 in 60..<70 { try? await server.notify(measurement, value: [0, bpm]) }
        }
    }
    sensor = (
        server, try await sensorAdapter.startAdvertising(Advertisement(localName: "HRM", serviceUUIDs: [.heartRate]))
    )
    adapter = radio.makeAdapter(name: "phone")
} else {
    adapter = if let argument { try await Adapter.named(argument) } else { try await Adapter.default() }
}

let device = try await adapter.scan(ScanFilter(serviceUUIDs: [.heartRate])).first(timeout: .seconds(10))
print("found \(device)")
try await adapter.withConnection(to: device, timeout: .seconds(10)) { peripheral in
    for try await value in try await peripheral.notifications(of: measurement).prefix(5) {
        print("heart rate: \(beatsPerMinute(value).map { "\($0) bpm" } ?? "malformed \(value)")")
    }
}
print("took 5 measurements; unsubscribed and disconnected")
if let sensor {
    await sensor.advertising.stop()
    await sensor.server.close()
}
