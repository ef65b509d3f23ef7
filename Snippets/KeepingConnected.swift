// KeepingConnected: keep a sensor connected through a link loss, with a set-up on every
// connection and a subscription that survives, then give up when the sensor goes away and find
// it again with a new scan.
//
// swift run KeepingConnected hci1 hci0     the sensor on hci1, the central on hci0 (real BlueZ, two adapters)
// swift run KeepingConnected --simulated   both on a simulated radio
import Able
import AbleSimulator

let sensorService: BluetoothUUID = "0C5E8F10-6A1D-4C43-9E4B-3D1A0E6C1A01"
let reading = CharacteristicID("0C5E8F11-6A1D-4C43-9E4B-3D1A0E6C1A01", service: sensorService)
let firmware = CharacteristicID("0C5E8F12-6A1D-4C43-9E4B-3D1A0E6C1A01", service: sensorService)

let arguments = CommandLine.arguments.dropFirst()
let radio = arguments.first == "--simulated" ? SimulatedRadio() : nil
let sensorAdapter =
    if let radio { radio.makeAdapter(name: "sensor") } else { try await Adapter.named(arguments.first ?? "hci1") }
let centralAdapter =
    if let radio {
        radio.makeAdapter(name: "central")
    } else {
        try await Adapter.named(arguments.dropFirst().first ?? "hci0")
    }

/// The readings the sensor has sent, so that each link's subscriber gets the next three.
actor Readings {
    var sent: UInt8 = 0
    func next() -> UInt8 {
        sent += 1
        return sent
    }
}

// The sensor, written with Able too: three readings to each new subscriber.
let readings = Readings()
let server = try await GATTServer.start(on: sensorAdapter) {
    Service(sensorService) {
        Characteristic(reading, properties: .notify)
        Characteristic(firmware, properties: .read, value: Array("1.0.3".utf8))
    }
    OnSubscriptionChange { server, _, _, isSubscribed in
        guard isSubscribed else { return }
        for _ in 0..<3 { try? await server.notify(reading, value: [await readings.next()]) }
    }
}
let sensorAdvertisement = Advertisement(localName: "sensor", serviceUUIDs: [sensorService])

// Scan before advertising (emulated controllers report an advertisement once).
let scan = try await centralAdapter.scan(ScanFilter(serviceUUIDs: [sensorService]))
var advertising = try await sensorAdapter.startAdvertising(sensorAdvertisement)
let discovery = try await scan.first(timeout: .seconds(30))
print("found \(discovery.address)")

// The central: keep the sensor connected, read its firmware on every connection, and take its
// readings across link losses. Two attempts, five seconds each, once it is gone.
let policy = ReconnectPolicy(connectTimeout: .seconds(5), maximumAttempts: 2)
do {
    try await centralAdapter.withMaintainedConnection(to: discovery, policy: policy) { peripheral in
        print("connected; firmware \(String(decoding: try await peripheral.read(firmware), as: UTF8.self))")
    } _: { connection in
        var values = 0
        for try await event in connection.notifications(of: reading) {
            switch event {
            case .enabled:
                print("receiving")
            case .interrupted(let reason):
                print("gap: \(reason.code)")
            case .value(let bytes):
                values += 1
                print("reading \(bytes)")
                if values == 3 {
                    // The link drops (the sensor ends it here; out of range in the field).
                    for central in await server.connectedCentrals { try await server.disconnect(central) }
                } else if values == 6 {
                    // The sensor goes away: it stops advertising and drops the link.
                    await advertising.stop()
                    for central in await server.connectedCentrals { try await server.disconnect(central) }
                }
            }
        }
    }
} catch let error as BluetoothError {
    print("gave up: \(error.code)")
}

// Found again by a new scan once it advertises again.
let rescan = try await centralAdapter.scan(ScanFilter(serviceUUIDs: [sensorService]))
advertising = try await sensorAdapter.startAdvertising(sensorAdvertisement)
print("found again: \(try await rescan.first(timeout: .seconds(30)).address == discovery.address)")
await advertising.stop()
await server.close()
