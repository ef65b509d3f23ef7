// The AbleLib guide's server (seed 000) in Able: a service with a characteristic that reads and
// indicates an L2CAP PSM, a descriptor, a read handler answering with the PSM, the PSM sent to
// subscribers when a central connects, a descriptor-write handler, advertising, and close.
// The PSM is a real one: an L2CAP listener's, which echoes what a central sends on the channel.
//
// swift run SeedServer [adapter] [seconds]   serve on real BlueZ for a while (default hci0, 60 s)
// swift run SeedServer --simulated           serve on a simulated radio; a central reads the PSM
import Able
import AbleSimulator

let serviceID: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
let psmID = CharacteristicID("ABDD3056-28FA-441D-A470-55A75A52553A", service: serviceID)
let psmDescription = DescriptorID(.characteristicUserDescription, characteristic: psmID)

let arguments = Array(CommandLine.arguments.dropFirst())
let radio = arguments.first == "--simulated" ? SimulatedRadio() : nil
let adapter =
    if let radio { radio.makeAdapter(name: "server") } else { try await Adapter.named(arguments.first ?? "hci0") }

// The channel the PSM leads to: echo every SDU back.
let listener = try await adapter.listenL2CAP()
let echo = Task {
    for try await channel in listener.channels {
        Task { for try await packet in channel.packets { try await channel.send(packet) } }
    }
}

let server = try await GATTServer.start(on: adapter) {
    Service(serviceID) {
        Characteristic(psmID, properties: [.read, .indicate], permissions: .readable) {
            Descriptor(.characteristicUserDescription, permissions: [.readable, .writable], value: Array("PSM".utf8))
        }
    }
    OnRead(psmID) { request in
        print("PSM read by \(request.central.map { "\($0.address)" } ?? "a central")")
        return listener.psm.bytes
    }
    OnConnectionStateChange { server, central, isConnected in
        print("\(central.address) \(isConnected ? "connected" : "disconnected")")
        if isConnected, await server.isSubscribed(psmID) {
            try? await server.indicate(psmID, value: listener.psm.bytes, timeout: .seconds(5))
        }
    }
    OnWrite(psmDescription) { request in
        print("descriptor written: \(String(decoding: request.value, as: UTF8.self))")
        return .store
    }
}
let advertising = try await adapter.startAdvertising(Advertisement(localName: "able", serviceUUIDs: [serviceID]))
print("serving \(listener.psm) on \(adapter.name)")

if let radio {
    let central = radio.makeAdapter(name: "central")
    let found = try await central.scan(ScanFilter(serviceUUIDs: [serviceID])).first(timeout: .seconds(5))
    try await central.withConnection(to: found) { peripheral in
        let psm = try await peripheral.read(psmID)
        print("the central read \(PSM(bytes: psm).map { "\($0)" } ?? "\(psm)")")
    }
} else {
    try await Task.sleep(for: .seconds(Int(arguments.dropFirst().first ?? "") ?? 60))
}

await advertising.stop()
await server.close()
await listener.close()
echo.cancel()
print("closed")
