// The seed's L2CAP flow: a server listens on a dynamic PSM and publishes it through a GATT
// characteristic; a central reads the PSM, opens a credit-based channel to it, and gets back
// what it sends from the server's echo loop.
//
// swift run L2CAPEcho hci1 hci0     server on hci1, central on hci0 (real BlueZ, two adapters)
// swift run L2CAPEcho --simulated   both on a simulated radio, the channel over a socketpair
import Able
import AbleSimulator

let echoService: BluetoothUUID = "0C5E8F00-6A1D-4C43-9E4B-3D1A0E6C1A01"
let psmCharacteristic = CharacteristicID("0C5E8F01-6A1D-4C43-9E4B-3D1A0E6C1A01", service: echoService)

let arguments = CommandLine.arguments.dropFirst()
let radio = arguments.first == "--simulated" ? SimulatedRadio() : nil
let serverAdapter =
    if let radio { radio.makeAdapter(name: "server") } else { try await Adapter.named(arguments.first ?? "hci1") }
let centralAdapter =
    if let radio {
        radio.makeAdapter(name: "central")
    } else {
        try await Adapter.named(arguments.dropFirst().first ?? "hci0")
    }

// Server: a listener on a free PSM, a characteristic that reads (and indicates) it, an echo loop.
let listener = try await serverAdapter.listenL2CAP()
let psm = listener.psm
print("server: listening on \(psm)")
let server = try await GATTServer.start(on: serverAdapter) {
    Service(echoService) { Characteristic(psmCharacteristic, properties: [.read, .indicate]) }
    OnRead(psmCharacteristic, answering: .immediately) { _ in psm.bytes }
    OnConnectionStateChange { server, _, isConnected in
        if isConnected { try? await server.indicate(psmCharacteristic, value: psm.bytes) }
    }
}
let echo = Task {
    for try await channel in listener.channels {
        for try await packet in channel.packets { try await channel.send(packet) }
    }
}

// Central: scan before advertising (emulated controllers report an advertisement once).
let scan = try await centralAdapter.scan(ScanFilter(serviceUUIDs: [echoService]))
let advertising = try await serverAdapter.startAdvertising(
    Advertisement(localName: "echo", serviceUUIDs: [echoService]))
let device = try await scan.first(timeout: .seconds(30))
try await centralAdapter.withConnection(to: device, timeout: .seconds(30)) { peripheral in
    let bytes = try await peripheral.read(psmCharacteristic)
    guard let psm = PSM(bytes: bytes) else { fatalError("the PSM characteristic holds \(bytes)") }
    print("central: read \(psm)")
    let channel = try await peripheral.openL2CAPChannel(psm: psm)
    var echoes = channel.packets.makeAsyncIterator()
    for message in ["ping", "hello over L2CAP", String(repeating: "0123456789", count: 20)] {
        try await channel.send(Array(message.utf8))
        guard let reply = try await echoes.next() else { fatalError("the channel ended") }
        print("central: echoed \(reply.count) bytes, \(reply == Array(message.utf8) ? "the same" : "DIFFERENT")")
    }
    await channel.close()
}
await advertising.stop()
await server.close()
await listener.close()
_ = await echo.result
print("done")
