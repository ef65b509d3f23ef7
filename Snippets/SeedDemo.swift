// Able's seed demo: the AbleLib GATT server and the RxBluetoothKit central, end to end.
//
// The server (seed 000) serves a PSM through a characteristic that reads and indicates it,
// with a descriptor, a read handler, an indication on connection and a descriptor-write
// handler, and advertises. Its second service carries the seed-002 characteristics: B1 says
// how many notifications to take, B2 sends them. The central finds the server, reads the PSM
// (service A) and B1 (service B), takes exactly B1 notifications of B2, and everything closes.
//
// Until Able's L2CAP listener lands, the PSM is a stand-in value (0x0080, the first dynamic LE
// PSM), and no channel is opened.
//
// swift run SeedDemo                      on the simulated radio (no hardware, no daemon)
// swift run SeedDemo --bluez hci1 hci0    on real BlueZ: server on hci1, central on hci0
import Able
import AbleSimulator

let serviceA: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
let psmCharacteristic: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A52553A"
// The seed declares the CCCD (0x2902) itself; BlueZ provides that one, so the demo's
// descriptor is a Characteristic User Description.
let psmDescriptor = BluetoothUUID.characteristicUserDescription
let serviceB: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2295"
let countCharacteristic: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A52553B"
let streamCharacteristic: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A52553C"
let psm = PSM(rawValue: 0x0080)
let notificationCount: UInt8 = 3

let clock = ContinuousClock()
let start = clock.now
func say(_ side: String, _ line: String) {
    let (seconds, attoseconds) = (clock.now - start).components
    let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
    print(
        "[\(String(repeating: " ", count: max(0, 6 - String(milliseconds).count)))\(milliseconds) ms] \(side): \(line)")
}

let arguments = Array(CommandLine.arguments.dropFirst())
let serverAdapter: Adapter
let centralAdapter: Adapter
let radio: SimulatedRadio?
if arguments.first == "--bluez" {
    serverAdapter = try await Adapter.named(arguments.count > 1 ? arguments[1] : "hci1")
    centralAdapter = try await Adapter.named(arguments.count > 2 ? arguments[2] : "hci0")
    radio = nil
    say("demo", "real BlueZ: server on \(serverAdapter.name), central on \(centralAdapter.name)")
} else {
    let simulated = SimulatedRadio()
    serverAdapter = simulated.makeAdapter(name: "sim-server")
    centralAdapter = simulated.makeAdapter(name: "sim-central")
    radio = simulated
    say("demo", "simulated radio: server on \(serverAdapter.name), central on \(centralAdapter.name)")
}

// The server builder, kept in a value: it could open the server again.
let definition = GATTServerDefinition {
    Service(serviceA) {
        Characteristic(psmCharacteristic, properties: [.read, .indicate], permissions: .readable) {
            Descriptor(psmDescriptor, permissions: [.readable, .writable], value: Array("PSM".utf8))
        }
    }
    Service(serviceB) {
        Characteristic(countCharacteristic, properties: .read, value: [notificationCount])
        Characteristic(streamCharacteristic, properties: .notify)
    }
    AutoManageDevices()
    OnRead([psmCharacteristic]) { request in
        say("server", "read of the PSM by \(request.central.map(String.init(describing:)) ?? "a central")")
        return psm.bytes
    }
    OnConnectionStateChange { server, central, isConnected in
        say("server", "\(central) \(isConnected ? "connected" : "disconnected")")
    }
    OnSubscriptionChange { server, _, uuid, isSubscribed in
        say(
            "server",
            "\(uuid == streamCharacteristic ? "B2" : "\(uuid)") \(isSubscribed ? "subscribed" : "unsubscribed")")
        guard isSubscribed, uuid == streamCharacteristic else { return }
        for index in 1...notificationCount {
            try? await server.notify(streamCharacteristic, value: [index])
        }
    }
    OnWriteDescriptor(psmDescriptor) { request in
        say("server", "descriptor written: \(request.value)")
        return .store
    }
    OnStateChange { _, isOpen in say("server", isOpen ? "open" : "closed") }
}

let server = try await GATTServer.start(on: serverAdapter, definition: definition)
// Scan before advertising: emulated controllers report an advertisement only once.
let scan = try await centralAdapter.scan(ScanFilter(serviceUUIDs: [serviceA]))
let advertising = try await serverAdapter.startAdvertising(Advertisement(localName: "able", serviceUUIDs: [serviceA]))
say("server", "advertising \(serviceA)")

let device = try await scan.first(timeout: .seconds(30))
say("central", "found \(device)")
try await centralAdapter.withConnection(to: device, timeout: .seconds(30)) { peripheral in
    say("central", "connected; \(try await peripheral.services().count) services")
    let psmBytes = try await peripheral.read(CharacteristicID(psmCharacteristic, service: serviceA))
    say("central", "service A: PSM = \(PSM(bytes: psmBytes).map(String.init(describing:)) ?? "\(psmBytes)")")
    let count = Int(try await peripheral.read(CharacteristicID(countCharacteristic, service: serviceB))[0])
    say("central", "service B: take \(count) notifications")
    let stream = CharacteristicID(streamCharacteristic, service: serviceB)
    for try await value in try await peripheral.notifications(of: stream).prefix(count) {
        say("central", "notification \(value)")
    }
    say("central", "took \(count); unsubscribing and disconnecting")
}
await advertising.stop()
await server.close()
if let radio {
    // Let the last events settle, then check that nothing was left open.
    for _ in 0..<100 where !radio.openResources.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
    say("demo", radio.openResources.isEmpty ? "nothing left open" : "LEFT OPEN: \(radio.openResources)")
}
say("demo", "done")
