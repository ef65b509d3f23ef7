import Able
import AbleBlueZ
import AbleIO
import Foundation
import Testing

extension RealBlueZ {
    /// LE credit-based channels over the emulated radio, hci0 (central) to hci1 (peripheral):
    /// Able against Able, Able against BlueZ's `l2test`, and the seed's PSM-through-GATT demo.
    @Suite(.timeLimit(.minutes(3)))
    struct L2CAP {
        /// A fixed PSM in the dynamic range, high enough that the kernel's own picks (from `0x0080`
        /// up) do not reach it while a test runs.
        static let fixedPSM = PSM(rawValue: 0x00F5)

        /// The listener's receive MTU; the central's is smaller, so each side's MTUs differ.
        static let peripheralMTU = 2048
        static let centralMTU = 512

        final class UUIDs: Sendable {
            let service = BluetoothUUID.random()
            let psm = BluetoothUUID.random()
        }

        // MARK: Able to Able

        @Test(arguments: [L2CAP.fixedPSM, PSM.automatic])
        func ableToAbleCarriesSDUsOfEverySizeBothWaysInOrder(psm: PSM) async throws {
            try await withRig { rig in
                try await rig.withChannel(psm: psm) { listener, central, peripheral in
                    if psm == .automatic {
                        #expect(listener.psm.isDynamic, "the kernel picked \(listener.psm)")
                    } else {
                        #expect(listener.psm == psm)
                    }
                    #expect(central.sendMTU == Self.peripheralMTU)
                    #expect(central.receiveMTU == Self.centralMTU)
                    #expect(peripheral.sendMTU == Self.centralMTU)
                    #expect(peripheral.receiveMTU == Self.peripheralMTU)
                    #expect(peripheral.peerAddress == rig.centralAddress)
                    #expect(central.peerAddress == rig.peripheralAddress)

                    let up = Self.sdus(upTo: central.sendMTU, seed: 1)
                    let down = Self.sdus(upTo: peripheral.sendMTU, seed: 2)
                    async let sentUp: Void = Self.send(up, on: central)
                    async let sentDown: Void = Self.send(down, on: peripheral)
                    async let receivedUp = Self.receive(up.count, from: peripheral, what: "hci1 to receive")
                    async let receivedDown = Self.receive(down.count, from: central, what: "hci0 to receive")
                    try await sentUp
                    try await sentDown
                    let (gotUp, gotDown) = try await (receivedUp, receivedDown)
                    #expect(gotUp.map(\.count) == up.map(\.count))
                    #expect(gotUp == up, "hci0 → hci1: SDUs lost, reordered or corrupted")
                    #expect(gotDown.map(\.count) == down.map(\.count))
                    #expect(gotDown == down, "hci1 → hci0: SDUs lost, reordered or corrupted")
                    await #expect(throws: BluetoothError.self) {
                        try await central.send([UInt8](repeating: 1, count: central.sendMTU + 1))
                    }
                }
            }
        }

        enum Side: String, Sendable, CaseIterable {
            case central, peripheral
        }

        /// How a stream ended: `nil` for a normal end, else the error's code.
        static func end(of channel: L2CAPChannel, what: String) async throws -> BluetoothError.Code? {
            try await endError(of: channel, what: what)?.code
        }

        /// The error a stream ended with, `nil` for a normal end.
        static func endError(of channel: L2CAPChannel, what: String) async throws -> BluetoothError? {
            try await withDeadline(.seconds(20), waitingFor: what) {
                do {
                    var packets = channel.packets.makeAsyncIterator()
                    while let packet = try await packets.next() {
                        Issue.record("\(what): got an SDU of \(packet.count) bytes instead of the end")
                    }
                    return nil
                } catch let error as BluetoothError {
                    return error
                }
            }
        }

        @Test(arguments: Side.allCases)
        func closingOneSideEndsTheOthersStreamAndItsSends(closer: Side) async throws {
            try await withRig { rig in
                try await rig.withChannel(psm: .automatic) { _, central, peripheral in
                    let (closing, other) = closer == .central ? (central, peripheral) : (peripheral, central)
                    // Something in flight first, so the end comes after data, as on a real link.
                    try await closing.send([1, 2, 3])
                    #expect(try await Self.receive(1, from: other, what: "the SDU before the close") == [[1, 2, 3]])
                    await closing.close()
                    // A peer's L2CAP Disconnection Request is a normal end (recv(2) returns 0), as
                    // L2CAPPacketStream documents; only a lost link or a reset throws.
                    let end = try await Self.end(of: other, what: "the \(closer) side's close to end the stream")
                    #expect(end == nil, "the other side's stream ended with \(String(describing: end))")
                    let sendAfterEnd = await failure { try await other.send([4]) } as? BluetoothError
                    #expect(sendAfterEnd?.code == .disconnected, "\(String(describing: sendAfterEnd))")
                    let sendAfterClose = await failure { try await closing.send([5]) } as? BluetoothError
                    #expect(sendAfterClose?.code == .notConnected, "\(String(describing: sendAfterClose))")
                    #expect(try await Self.end(of: closing, what: "the closed side's stream to end") == nil)
                }
            }
        }

        @Test func losingTheLinkEndsBothStreamsWithDisconnected() async throws {
            try await withRig { rig in
                let listener = try await rig.peripheral.listenL2CAP(receiveMTU: Self.peripheralMTU)
                let uuids = UUIDs()
                try await rig.discovering([uuids.service]) { discovery in
                    let device = rig.central.peripheral(for: discovery)
                    try await device.connect(timeout: Rig.connectTimeout)
                    let central = try await rig.openChannel(on: device, psm: listener.psm)
                    let peripheral = try await Self.accept(on: listener)
                    try await central.send([0xAB])
                    #expect(try await Self.receive(1, from: peripheral, what: "the first SDU") == [[0xAB]])
                    // Device1.Disconnect drops the LE link under the channel.
                    try await device.disconnect()
                    let centralEnd = try await Self.endError(of: central, what: "hci0's stream to end with the link")
                    let peripheralEnd = try await Self.endError(
                        of: peripheral, what: "hci1's stream to end with the link")
                    #expect(centralEnd?.code == .disconnected, "\(String(describing: centralEnd))")
                    #expect(peripheralEnd?.code == .disconnected, "\(String(describing: peripheralEnd))")
                    // The errno of the HCI reason. The other side gets "Remote User Terminated
                    // Connection" (0x13, ECONNRESET); the side that ended the link (hci0) gets
                    // "Connection Terminated By Local Host" (0x16, ECONNABORTED), from a real
                    // controller as from the tier's btvirt (built from BlueZ 5.87 for every version;
                    // btvirt 5.66 echoed the host's reason to both sides).
                    #expect(
                        (centralEnd?.cause as? Errno)?.rawValue == ECONNABORTED, "\(String(describing: centralEnd))")
                    #expect(
                        (peripheralEnd?.cause as? Errno)?.rawValue == ECONNRESET, "\(String(describing: peripheralEnd))"
                    )
                    let sendError = await failure { try await peripheral.send([1]) } as? BluetoothError
                    #expect(sendError?.code == .disconnected, "\(String(describing: sendError))")
                    await central.close()
                    await peripheral.close()
                }
                await listener.close()
            }
        }

        @Test func aListenerDemandingHighSecurityRefusesAnUnpairedCentral() async throws {
            try await withRig { rig in
                let listener = try await rig.peripheral.listenL2CAP(security: .high)
                let uuids = UUIDs()
                try await rig.discovering([uuids.service]) { discovery in
                    try await rig.connected(to: discovery) { device in
                        let error = await failure {
                            try await rig.openChannel(on: device, psm: listener.psm)
                        }
                        let bluetoothError = try #require(error as? BluetoothError, "\(String(describing: error))")
                        // hci1 answers "insufficient authentication" (0x0005); hci0's kernel tries
                        // SMP with MITM, which no agent here can do, and drops the link
                        // ("Authentication Failure"). The socket's errno is that of the reason in
                        // hci0's Disconnection Complete: like a real controller, the tier's btvirt
                        // (BlueZ 5.87's, for every version) reports 0x16 (ECONNABORTED) to the side
                        // that ended the link; btvirt 5.66 echoed 0x05 (EACCES).
                        #expect(bluetoothError.code == .notPermitted, "\(bluetoothError)")
                        #expect((bluetoothError.cause as? Errno)?.rawValue == ECONNABORTED, "\(bluetoothError)")
                    }
                }
                await listener.close()
            }
        }

        @Test func openingAChannelToAPSMNoOneListensOnFailsWithConnectionAttemptFailed() async throws {
            try await withRig { rig in
                let uuids = UUIDs()
                try await rig.discovering([uuids.service]) { discovery in
                    try await rig.connected(to: discovery) { device in
                        let error = await failure {
                            try await device.openL2CAPChannel(psm: PSM(rawValue: 0x00F7), timeout: .seconds(20))
                        }
                        let bluetoothError = try #require(error as? BluetoothError, "\(String(describing: error))")
                        #expect(bluetoothError.code == .connectionAttemptFailed, "\(bluetoothError)")
                    }
                }
            }
        }

        // MARK: Against BlueZ's l2test

        /// `l2test` frames: a little-endian sequence number (4 bytes), the frame's length (2 bytes),
        /// then `0x7F` to the end.
        static func l2testFrame(_ sequence: Int, size: Int) -> [UInt8] {
            var frame = [UInt8](repeating: 0x7F, count: size)
            for index in 0..<4 { frame[index] = UInt8(truncatingIfNeeded: sequence >> (8 * index)) }
            frame[4] = UInt8(truncatingIfNeeded: size)
            frame[5] = UInt8(truncatingIfNeeded: size >> 8)
            return frame
        }

        /// What `l2test -d`/`-x`/`-y` dumped, one SDU per hexdump (`00000000: 61 62 … ascii`,
        /// each SDU's dump starting at offset 0).
        ///
        /// Its `Received N bytes` lines go to standard error unbuffered and the hexdump to a
        /// buffered standard output, so the two do not interleave in the output file.
        static func dumpedSDUs(in output: String) -> [[UInt8]] {
            var sdus: [[UInt8]] = []
            for line in output.split(separator: "\n") {
                let offset = line.prefix(8)
                guard line.count > 10, offset.count == 8, offset.allSatisfy(\.isHexDigit),
                    line.dropFirst(8).hasPrefix(": ")
                else { continue }
                if offset == "00000000" { sdus.append([]) }
                guard !sdus.isEmpty else { continue }
                // 16 columns of "xx " after "00000000: ", blanks past the end.
                let columns = Array(line.dropFirst(10).prefix(48))
                for index in stride(from: 0, to: columns.count - 1, by: 3) {
                    guard let byte = UInt8(String(columns[index...index + 1]), radix: 16) else { break }
                    sdus[sdus.count - 1].append(byte)
                }
            }
            return sdus
        }

        static let l2test = "/usr/bin/l2test"
        static let frameSize = 100
        static let frameCount = 5

        @Test func ableConnectsToL2testListeningOnHci1() async throws {
            try #require(FileManager.default.isExecutableFile(atPath: Self.l2test), "bluez-test-tools is missing")
            let psm = Self.fixedPSM
            try await withRig { rig in
                // -x: listen, send N frames, then dump what arrives.
                let child = try ChildProcess.start(
                    Self.l2test,
                    [
                        "-x", "-V", "le_public", "-i", Guest.peripheral, "-P", "\(psm.rawValue)",
                        "-b", "\(Self.frameSize)", "-N", "\(Self.frameCount)",
                    ])
                try await withCleanup {
                    try await eventually("l2test to listen") { child.output.contains("Waiting for connection") }
                    let uuids = UUIDs()
                    try await rig.discovering([uuids.service]) { discovery in
                        try await rig.connected(to: discovery) { device in
                            let channel = try await rig.openChannel(on: device, psm: psm)
                            #expect(channel.sendMTU == 672, "l2test asks for an MTU of 672")
                            let frames = try await Self.receive(Self.frameCount, from: channel, what: "l2test's frames")
                            #expect(frames == (0..<Self.frameCount).map { Self.l2testFrame($0, size: Self.frameSize) })
                            let replies = (0..<3).map {
                                Array("able to l2test #\($0) ".utf8) + Self.pattern(40, seed: $0)
                            }
                            for reply in replies { try await channel.send(reply) }
                            // l2test dumps to a buffered stdout: it shows once its child exits with the channel.
                            try await Task.sleep(for: .milliseconds(500))
                            await channel.close()
                            try await eventually("l2test to dump the SDUs", timeout: .seconds(15)) {
                                Self.dumpedSDUs(in: child.output).count >= replies.count
                            }
                            #expect(Self.dumpedSDUs(in: child.output) == replies, "\(child.output)")
                        }
                    }
                } cleanup: {
                    child.kill()
                }
            }
        }

        @Test func l2testOnHci0ConnectsToAnAbleListenerOnHci1() async throws {
            try #require(FileManager.default.isExecutableFile(atPath: Self.l2test), "bluez-test-tools is missing")
            try await withRig { rig in
                let listener = try await rig.peripheral.listenL2CAP(psm: .automatic)
                let uuids = UUIDs()
                // hci1 must be connectable for the kernel on hci0 to reach it.
                try await rig.advertising([uuids.service], name: "l2") {
                    // -y: connect, send N frames, then dump what arrives.
                    let child = try ChildProcess.start(
                        Self.l2test,
                        [
                            "-y", "-V", "le_public", "-i", Guest.central, "-P", "\(listener.psm.rawValue)",
                            "-b", "\(Self.frameSize)", "-N", "\(Self.frameCount)", rig.peripheralAddress.description,
                        ])
                    try await withCleanup {
                        let channel = try await Self.accept(on: listener, timeout: .seconds(40))
                        #expect(channel.peerAddress == rig.centralAddress)
                        #expect(channel.sendMTU == 672, "l2test asks for an MTU of 672")
                        let frames = try await Self.receive(Self.frameCount, from: channel, what: "l2test's frames")
                        #expect(frames == (0..<Self.frameCount).map { Self.l2testFrame($0, size: Self.frameSize) })
                        let replies = (0..<3).map { Array("able to l2test #\($0) ".utf8) + Self.pattern(60, seed: $0) }
                        for reply in replies { try await channel.send(reply) }
                        try await Task.sleep(for: .milliseconds(500))
                        await channel.close()
                        // Closing ends l2test's dump, and l2test.
                        let status = try await withDeadline(.seconds(15), waitingFor: "l2test to exit") {
                            await child.exitStatus()
                        }
                        #expect(status == 0, "\(child.output)")
                        #expect(Self.dumpedSDUs(in: child.output) == replies, "\(child.output)")
                    } cleanup: {
                        child.kill()
                    }
                }
                await listener.close()
            }
        }

        // MARK: The seed demo

        @Test func theSeedDemoPublishesThePSMInACharacteristicAndEchoesOverTheChannel() async throws {
            try await withRig { rig in
                let listener = try await rig.peripheral.listenL2CAP()
                let psm = listener.psm
                let uuids = UUIDs()
                let connected = Recorder<BluetoothAddress>()
                let definition = GATTServerDefinition {
                    Service(uuids.service) { Characteristic(uuids.psm, properties: [.read, .indicate]) }
                    OnRead(CharacteristicID(uuids.psm, service: uuids.service), answering: .immediately) { _ in
                        psm.bytes
                    }
                    OnConnectionStateChange { server, central, isConnected in
                        guard isConnected else { return }
                        connected.append(central.address)
                        // No central has subscribed yet when it connects: the indication may find
                        // no one to confirm it, hence the short timeout.
                        try? await server.indicate(
                            CharacteristicID(uuids.psm, service: uuids.service), value: psm.bytes, timeout: .seconds(2))
                    }
                }
                let echo = Task {
                    for try await channel in listener.channels {
                        for try await packet in channel.packets { try await channel.send(packet) }
                    }
                }
                defer { echo.cancel() }
                try await rig.withConnectedServer(definition, advertising: [uuids.service]) { _, device in
                    let bytes = try await device.read(CharacteristicID(uuids.psm, service: uuids.service))
                    #expect(PSM(bytes: bytes) == psm)
                    let channel = try await rig.openChannel(on: device, psm: try #require(PSM(bytes: bytes)))
                    let messages = (1...5).map { Array("hello #\($0) ".utf8) + Self.pattern($0 * 37, seed: $0) }
                    for message in messages { try await channel.send(message) }
                    #expect(try await Self.receive(messages.count, from: channel, what: "the echoes") == messages)
                    await channel.close()
                    try await eventually("the server's connection handler to run") {
                        connected.all == [rig.centralAddress]
                    }
                }
                await listener.close()
                _ = await echo.result
            }
        }

        @Test func theL2CAPEchoSnippetBinary() async throws {
            let snippet = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("L2CAPEcho").path
            try #require(
                FileManager.default.isExecutableFile(atPath: snippet),
                "\(snippet) is missing: `swift build` builds it (`--product AblePackageTests` does not)")
            try await withRig { _ in
                let child = try ChildProcess.start(snippet, [Guest.peripheral, Guest.central])
                let status = try await withCleanup {
                    try await withDeadline(.seconds(90), waitingFor: "the snippet to exit") { await child.exitStatus() }
                } cleanup: {
                    child.kill()
                }
                let output = child.output
                #expect(status == 0, "L2CAPEcho exited with \(status):\n\(output)")
                let lines = output.split(separator: "\n").map(String.init)
                #expect(lines.contains { $0.hasPrefix("server: listening on PSM 0x00") }, "\(output)")
                #expect(lines.contains { $0.hasPrefix("central: read PSM 0x00") }, "\(output)")
                #expect(
                    lines.filter { $0.hasPrefix("central: echoed ") && $0.hasSuffix("the same") }.count == 3,
                    "\(output)")
                #expect(lines.last == "done", "\(output)")
            }
        }

        // MARK: Helpers

        /// Deterministic bytes, different for each `seed`.
        static func pattern(_ count: Int, seed: Int) -> [UInt8] {
            (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed &* 101 &+ count) }
        }

        /// SDUs of 1, 23, 100, 244 and 512 bytes and of the MTU, three of each size.
        static func sdus(upTo mtu: Int, seed: Int) -> [[UInt8]] {
            let sizes = Set([1, 23, 100, 244, 512, mtu].filter { $0 <= mtu }).sorted()
            return sizes.flatMap { size in (0..<3).map { pattern(size, seed: seed * 1000 + size + $0) } }
        }

        static func send(_ sdus: [[UInt8]], on channel: L2CAPChannel) async throws {
            for sdu in sdus { try await channel.send(sdu) }
        }

        static func receive(_ count: Int, from channel: L2CAPChannel, what: String) async throws -> [[UInt8]] {
            try await withDeadline(.seconds(30), waitingFor: "\(what) (\(count) SDUs)") {
                var packets: [[UInt8]] = []
                var iterator = channel.packets.makeAsyncIterator()
                while packets.count < count, let packet = try await iterator.next() { packets.append(packet) }
                return packets
            }
        }

        static func accept(on listener: L2CAPListener, timeout: Duration = .seconds(20)) async throws -> L2CAPChannel {
            try await withDeadline(timeout, waitingFor: "a channel on \(listener.psm)") {
                var channels = listener.channels.makeAsyncIterator()
                guard let channel = try await channels.next() else { throw StreamEnded(waitingFor: "a channel") }
                return channel
            }
        }
    }
}

extension Rig {
    /// Listens on hci1 at `psm`, finds and connects hci1 from hci0, opens a channel, and runs
    /// `body` with the listener and both ends; then closes them and disconnects.
    fileprivate func withChannel(
        psm: PSM,
        _ body: (L2CAPListener, _ central: L2CAPChannel, _ peripheral: L2CAPChannel) async throws -> Void
    ) async throws {
        let listener = try await peripheral.listenL2CAP(psm: psm, receiveMTU: RealBlueZ.L2CAP.peripheralMTU)
        let uuids = RealBlueZ.L2CAP.UUIDs()
        try await withCleanup {
            try await discovering([uuids.service]) { discovery in
                let device = central.peripheral(for: discovery)
                try await device.connect(timeout: Self.connectTimeout)
                let channel = try await openChannel(
                    on: device, psm: listener.psm, receiveMTU: RealBlueZ.L2CAP.centralMTU)
                try await withCleanup {
                    let accepted = try await RealBlueZ.L2CAP.accept(on: listener)
                    try await withCleanup {
                        try await body(listener, channel, accepted)
                    } cleanup: {
                        await accepted.close()
                    }
                } cleanup: {
                    await channel.close()
                    try? await device.disconnect()
                }
            }
        } cleanup: {
            await listener.close()
        }
    }

    /// Opens a channel from the connected `device` to `psm`; once more on a new link if the
    /// first attempt is refused.
    ///
    /// Both adapters run one `bluetoothd` with EATT, so right after a connection each side opens
    /// EATT channels to the other at the same time, and Linux 6.1 sometimes leaves hci1 with a
    /// stale channel whose peer CID hci0 has freed. hci0 then hands that CID to the next channel
    /// it opens, and hci1 refuses it with "Source CID already allocated" (0x000A), which the
    /// kernel reports as `ECONNREFUSED` (btmon shows it). The stale channel lives as long as the
    /// link, so a new link is the way out.
    func openChannel(
        on device: Peripheral, psm: PSM, receiveMTU: Int? = nil, security: L2CAPChannel.SecurityLevel = .low
    ) async throws -> L2CAPChannel {
        do {
            return try await device.openL2CAPChannel(
                psm: psm, security: security, receiveMTU: receiveMTU, timeout: .seconds(20))
        } catch let error as BluetoothError where error.code == .connectionAttemptFailed {
            print("opening a channel to \(psm) was refused (\(error)); trying once more on a new link")
            try await device.disconnect()
            try await device.connect(timeout: Self.connectTimeout)
            return try await device.openL2CAPChannel(
                psm: psm, security: security, receiveMTU: receiveMTU, timeout: .seconds(20))
        }
    }
}
