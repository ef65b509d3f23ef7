// The RxBluetoothKit scenario of the seed, in Able: find a device advertising service A or B,
// read characteristic A1 of service A, read B1 of service B, then take exactly as many
// notifications of B2 as B1's first byte says. Timeouts everywhere; nothing left subscribed.
//
// Run against real BlueZ: `swift run ReadAcrossServices [adapter]` with a peripheral serving
// these UUIDs in range (the real-BlueZ tests start one on hci1 and run this against it), or
// `swift run ReadAcrossServices --simulated` against a simulated one.
import Able
import AbleSimulator

enum BLEService: String, ServiceIdentifier {
    case serviceA = "6e400001-0000-1000-8000-00805f9b34fb"
    case serviceB = "6e400002-0000-1000-8000-00805f9b34fb"
}

enum BLECharacteristic: String, CharacteristicIdentifier {
    case charA1 = "6e400011-0000-1000-8000-00805f9b34fb"
    case charB1 = "6e400021-0000-1000-8000-00805f9b34fb"
    case charB2 = "6e400022-0000-1000-8000-00805f9b34fb"

    var service: any ServiceIdentifier {
        switch self {
        case .charA1: BLEService.serviceA
        case .charB1, .charB2: BLEService.serviceB
        }
    }
}

let arguments = CommandLine.arguments.dropFirst()
let adapter: Adapter
var simulatedPeripheral: (server: GATTServer, advertising: AdvertisingSet)?
if arguments.first == "--simulated" {
    // The peripheral, an Able GATT server on a simulated radio: B1 says 3, and B2 notifies as
    // soon as a central subscribes.
    let radio = SimulatedRadio()
    let peripheralAdapter = radio.makeAdapter(name: "peripheral")
    let server = try await GATTServer.start(on: peripheralAdapter) {
        Service(BLEService.serviceA) { Characteristic(BLECharacteristic.charA1, properties: .read, value: [0xA1]) }
        Service(BLEService.serviceB) {
            Characteristic(BLECharacteristic.charB1, properties: .read, value: [3])
            Characteristic(BLECharacteristic.charB2, properties: .notify)
        }
        OnSubscriptionChange { server, _, _, isSubscribed in
            guard isSubscribed else { return }
            for value: UInt8 in 1...5 { try? await server.notify(BLECharacteristic.charB2, value: [value]) }
        }
    }
    let advertising = try await peripheralAdapter.startAdvertising(
        Advertisement(localName: "seed", serviceUUIDs: [BLEService.serviceB.uuid]))
    simulatedPeripheral = (server, advertising)
    adapter = radio.makeAdapter(name: "central")
} else {
    adapter = if let name = arguments.first { try await Adapter.named(name) } else { try await Adapter.default() }
}
guard await adapter.state.isPowered else { fatalError("\(adapter.name) is powered off") }

// (3 s to find it, as in the original; BlueZ's emulated controllers may need longer.)
let timeout = Duration.seconds(arguments.dropFirst().first.flatMap { Int($0) } ?? 3)
let device = try await adapter.scan(ScanFilter(serviceUUIDs: [BLEService.serviceA.uuid, BLEService.serviceB.uuid]))
    .first(timeout: timeout)
print("found \(device)")

try await adapter.withConnection(to: device, timeout: Duration.seconds(10)) { peripheral in
    let a1 = try await peripheral.read(BLECharacteristic.charA1)
    let b1 = try await peripheral.read(BLECharacteristic.charB1)
    print("A1 = \(a1), B1 = \(b1)")
    let count = Int(b1.first ?? 0)
    for try await value in try await peripheral.notifications(of: BLECharacteristic.charB2).prefix(count) {
        print("B2 notified \(value)")
    }
    print("took \(count) notifications; the subscription ended with the loop")
}
if let simulatedPeripheral {
    await simulatedPeripheral.advertising.stop()
    await simulatedPeripheral.server.close()
}
