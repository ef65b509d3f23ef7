import Able
import AbleSimulator

/// `able demo`: the seed scenario end to end, with a timed transcript.
///
/// The server (the AbleLib guide's, seed 000) listens for L2CAP channels, publishes the PSM
/// through a characteristic that reads and indicates it (with a descriptor, a read handler, the
/// PSM sent to subscribers when a central connects, and a descriptor-write handler), serves the
/// seed-002 characteristics in a second service, and advertises. The central (seed 002) finds
/// it, reads the PSM (service A) and a count (service B), takes exactly that many notifications,
/// opens the L2CAP channel and exchanges data both ways; then everything closes.
struct DemoCommand: Command {
    static let serviceA: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
    static let psmCharacteristic: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A52553A"
    static let psmDescriptor = BluetoothUUID.characteristicUserDescription
    static let serviceB: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2295"
    static let countCharacteristic: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A52553B"
    static let streamCharacteristic: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A52553C"

    static let spec = CommandSpec(
        name: "demo", summary: "run the seed scenario: GATT server, central and L2CAP, end to end", positionals: [],
        options: [
            .init(name: "bluez", help: "use real BlueZ adapters (default: the simulated radio)"),
            .init(name: "server", value: "NAME", help: "the server's BlueZ adapter (default hci1; implies --bluez)"),
            .init(name: "central", value: "NAME", help: "the central's BlueZ adapter (default hci0; implies --bluez)"),
            .init(name: "notifications", value: "N", help: "how many notifications the central takes (default 3)"),
            CommandSpec.timeout(30, "each step"), CommandSpec.json,
        ],
        details: "JSON: one {\"ms\":…,\"side\":…,\"event\":…} object per transcript line.")

    var bluez: (server: String, central: String)?
    var notifications: Int
    var timeout: Duration

    init(_ arguments: ParsedArguments) throws(UsageError) {
        let server = try arguments.adapterName("server")
        let central = try arguments.adapterName("central")
        if arguments.flag("bluez") || server != nil || central != nil {
            bluez = (server ?? "hci1", central ?? "hci0")
            guard bluez?.server != bluez?.central else {
                throw UsageError("the server and the central need two adapters")
            }
        }
        notifications = try arguments.int("notifications", in: 0...255) ?? 3
        timeout = try arguments.seconds("timeout", default: .seconds(30))
    }

    func run(in context: CommandContext) async throws {
        let transcript = Transcript(console: context.console)
        let serverAdapter: Adapter
        let centralAdapter: Adapter
        var openResources: (@Sendable () -> [String])?
        var clock: SimulatedClock?
        if let bluez {
            serverAdapter = try await context.adapter(bluez.server)
            centralAdapter = try await context.adapter(bluez.central)
            transcript.say("demo", "real BlueZ: server on \(serverAdapter.name), central on \(centralAdapter.name)")
        } else {
            let simulated = context.simulatedPair()
            (serverAdapter, centralAdapter, openResources, clock) = (
                simulated.server, simulated.central, simulated.openResources, simulated.clock
            )
            transcript.say(
                "demo", "simulated radio: server on \(serverAdapter.name), central on \(centralAdapter.name)")
        }
        let notifications = UInt8(notifications)
        let timeout = timeout
        if let clock {
            // On the simulated radio's executor, so that its clock sees every step of the scenario.
            try await clock.run {
                try await Self.scenario(
                    server: serverAdapter, central: centralAdapter, notifications: notifications, timeout: timeout,
                    transcript: transcript)
            }
        } else {
            try await Self.scenario(
                server: serverAdapter, central: centralAdapter, notifications: notifications, timeout: timeout,
                transcript: transcript)
        }
        if let openResources {
            let open = openResources()
            guard open.isEmpty else {
                throw BluetoothError(.failed, message: "the demo left open: \(open.joined(separator: "; "))")
            }
            transcript.say("demo", "nothing left open on the radio")
        }
        transcript.say("demo", "done")
    }

    /// The scenario itself, on any two adapters that can reach each other.
    static func scenario(
        server serverAdapter: Adapter, central centralAdapter: Adapter, notifications: UInt8, timeout: Duration,
        transcript: Transcript
    ) async throws {
        let listener = try await serverAdapter.listenL2CAP()
        transcript.say("server", "L2CAP listening on \(listener.psm)")
        let echoes = Task.inheritingExecutor { try await echo(listener.channels, transcript: transcript) }
        defer { echoes.cancel() }
        let server = try await GATTServer.start(
            on: serverAdapter, definition: definition(psm: listener.psm, count: notifications, transcript: transcript))
        var advertising: AdvertisingSet?
        do {
            // Scan before advertising: emulated controllers report an advertisement only once.
            let scan = try await centralAdapter.scan(ScanFilter(serviceUUIDs: [serviceA]))
            advertising = try await serverAdapter.startAdvertising(
                Advertisement(localName: "able", serviceUUIDs: [serviceA]))
            transcript.say("server", "advertising service A")
            let device = try await scan.first(timeout: timeout)
            transcript.say("central", "found \(device)")
            try await centralAdapter.withConnection(to: device, timeout: timeout) { peripheral in
                try await central(peripheral, timeout: timeout, transcript: transcript)
            }
            transcript.say("central", "disconnected")
        } catch {
            await advertising?.stop()
            await server.close()
            await listener.close()
            throw error
        }
        await advertising?.stop()
        await server.close()
        await listener.close()
        try await echoes.value
        transcript.say("server", "closed: advertising stopped, GATT server unregistered, listener closed")
    }

    private static func central(_ peripheral: Peripheral, timeout: Duration, transcript: Transcript) async throws {
        transcript.say("central", "connected; \(try await peripheral.services().count) services resolved")
        let psmBytes = try await peripheral.read(CharacteristicID(psmCharacteristic, service: serviceA))
        guard let psm = PSM(bytes: psmBytes) else {
            throw BluetoothError(.failed, message: "the PSM characteristic held \(psmBytes.hex), not a PSM")
        }
        transcript.say("central", "service A: read \(psm)")
        let description = try await peripheral.read(
            DescriptorID(psmDescriptor, characteristic: CharacteristicID(psmCharacteristic, service: serviceA)))
        transcript.say(
            "central", "service A: the PSM's descriptor says \"\(String(decoding: description, as: UTF8.self))\"")
        let count = Int(try await peripheral.read(CharacteristicID(countCharacteristic, service: serviceB)).first ?? 0)
        transcript.say("central", "service B: take \(count) notifications")
        let stream = try await peripheral.notifications(of: CharacteristicID(streamCharacteristic, service: serviceB))
        var taken = 0
        for try await value in stream.prefix(count) {
            taken += 1
            transcript.say("central", "notification \(taken) of \(count): \(value.hex)")
        }
        guard taken == count else {
            throw BluetoothError(.failed, message: "the notifications ended after \(taken) of \(count)")
        }
        transcript.say("central", "took \(count); unsubscribed")

        let channel = try await peripheral.openL2CAPChannel(psm: psm, timeout: timeout)
        transcript.say("central", "L2CAP channel open (send MTU \(channel.sendMTU), receive MTU \(channel.receiveMTU))")
        do {
            var replies = channel.packets.makeAsyncIterator()
            let sizes = [5, 64, min(channel.sendMTU, channel.receiveMTU)]
            for (index, size) in sizes.enumerated() {
                let message =
                    index == 0 ? Array("hello".utf8) : (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
                try await channel.send(message)
                guard let reply = try await replies.next() else {
                    throw BluetoothError(.disconnected, message: "the server closed the channel before echoing")
                }
                guard reply == message else {
                    throw BluetoothError(
                        .failed, message: "the echo of \(size) bytes came back as \(reply.count) different bytes")
                }
                transcript.say("central", "sent \(message.count) bytes, got them echoed")
            }
        } catch {
            await channel.close()
            throw error
        }
        await channel.close()
        transcript.say("central", "L2CAP channel closed")
    }

    /// Echoes every SDU on every channel until the listener is closed and its channels end.
    private static func echo(_ channels: L2CAPChannelStream, transcript: Transcript) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            for try await channel in channels {
                transcript.say(
                    "server", "L2CAP channel accepted from \(channel.peerAddress.map { "\($0)" } ?? "a peer")")
                group.addTask {
                    var echoed = 0
                    do {
                        for try await packet in channel.packets {
                            try await channel.send(packet)
                            echoed += 1
                        }
                        transcript.say("server", "L2CAP channel closed by the central after \(echoed) echoes")
                    } catch {
                        // One peer's channel failing ends that channel, not the server.
                        transcript.say("server", "L2CAP channel failed after \(echoed) echoes: \(error)")
                    }
                    await channel.close()
                }
            }
        }
    }

    /// The server of the AbleLib guide, with the seed-002 service beside it.
    static func definition(psm: PSM, count: UInt8, transcript: Transcript) -> GATTServerDefinition {
        let psmID = CharacteristicID(psmCharacteristic, service: serviceA)
        return GATTServerDefinition {
            Service(serviceA) {
                Characteristic(psmCharacteristic, properties: [.read, .indicate], permissions: .readable) {
                    Descriptor(psmDescriptor, permissions: [.readable, .writable], value: Array("L2CAP PSM".utf8))
                }
            }
            Service(serviceB) {
                Characteristic(countCharacteristic, properties: .read, value: [count])
                Characteristic(streamCharacteristic, properties: .notify)
            }
            AutoManageDevices()
            OnRead(psmID, answering: .immediately) { request in
                transcript.say("server", "PSM read by \(request.central.map { "\($0.address)" } ?? "a central")")
                return psm.bytes
            }
            OnConnectionStateChange { server, central, isConnected in
                transcript.say("server", "\(central.address) \(isConnected ? "connected" : "disconnected")")
                // As the guide does: send the PSM to the centrals that subscribed to it.
                let psmID = CharacteristicID(psmCharacteristic, service: serviceA)
                if isConnected, await server.isSubscribed(psmID) {
                    try? await server.indicate(psmID, value: psm.bytes, timeout: .seconds(5))
                }
            }
            OnSubscriptionChange { server, _, uuid, isSubscribed in
                guard uuid == streamCharacteristic else { return }
                transcript.say(
                    "server", "B2 \(isSubscribed ? "subscribed: sending \(count) notifications" : "unsubscribed")")
                guard isSubscribed, count > 0 else { return }
                for index in 1...count {
                    try? await server.notify(CharacteristicID(streamCharacteristic, service: serviceB), value: [index])
                }
            }
            OnWrite(DescriptorID(psmDescriptor, characteristic: psmID), answering: .immediately) { request in
                transcript.say("server", "PSM descriptor written: \(request.value.hex)")
                return .store
            }
        }
    }
}

/// The demo's timed transcript: `[  12.3 ms] side: what happened`, or JSON Lines.
final class Transcript: Sendable {
    let console: Console
    private let start = ContinuousClock.now

    init(console: Console) { self.console = console }

    /// Prints `event`, escaped: on BlueZ it can carry a device's name or BlueZ's words.
    func say(_ side: String, _ event: String) {
        let milliseconds = (ContinuousClock.now - start).seconds * 1000
        let stamp = milliseconds.formatted(places: 1)
        console.result(
            "[\(String(repeating: " ", count: max(0, 8 - stamp.count)))\(stamp) ms] \(side): \(Console.escaped(event))",
            json: .object([("ms", .double(milliseconds)), ("side", .string(side)), ("event", .string(event))]))
    }
}
