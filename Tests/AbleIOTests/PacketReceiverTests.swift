import AbleTestSupport
import Foundation
import Testing

@testable import AbleIO

/// The receiving side of a notification socket (`PacketReceiver` with `batching`): several SDUs per
/// `recvmmsg(2)`, no call wasted on a socket the last call found empty, and the end and errors in
/// order.
struct PacketReceiverTests {
    /// A socketpair holding `packets` (sent into the first end), and a receiver on the second end
    /// whose calls `injection` counts.
    static func receiver(
        holding packets: [[UInt8]], receiveMTU: Int, injection: FaultInjection, batching: Bool = true
    ) throws -> (receiver: PacketReceiver, sender: CInt, socket: CInt) {
        let (sender, socket) = try LocalSockets.seqpacketPair(mtu: max(receiveMTU, 100))
        for packet in packets {
            let sent = packet.withUnsafeBytes { Glibc.send(sender, $0.baseAddress, $0.count, 0) }
            #expect(sent == packet.count)
        }
        let receiver = PacketReceiver(
            socket: socket, operations: injection.operations, receiveMTU: receiveMTU, batching: batching)
        return (receiver, sender, socket)
    }

    /// Expects `receiver` to give these SDUs, in order.
    static func expectSDUs(
        _ expected: [[UInt8]], from receiver: PacketReceiver, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for sdu in expected {
            guard case .packet(let packet) = receiver.receive() else {
                Issue.record("an SDU was missing", sourceLocation: sourceLocation)
                return
            }
            #expect(packet == sdu, sourceLocation: sourceLocation)
        }
    }

    static func packet(_ index: Int) -> [UInt8] { [UInt8(index), 0xA5, UInt8(index)] }

    @Test("SDUs waiting in the socket come several per recvmmsg, whole and in order; a drained socket costs no call")
    func batches() throws {
        let injection = FaultInjection()
        let packets = (0..<20).map(Self.packet)
        let (receiver, sender, socket) = try Self.receiver(holding: packets, receiveMTU: 100, injection: injection)
        defer {
            close(sender)
            close(socket)
        }
        #expect(PacketReceiver.batchCapacity(receiveMTU: 100) == 8)
        var received: [[UInt8]] = []
        var callsAfter: [Int] = []
        for _ in 0..<20 {
            guard case .packet(let packet) = receiver.receive() else {
                Issue.record("an SDU was missing")
                return
            }
            received.append(packet)
            callsAfter.append(injection.receiveCalls)
        }
        #expect(received == packets)
        // 8, 8, then the last 4 with room for 8: the socket was empty.
        #expect(callsAfter == Array(repeating: 1, count: 8) + Array(repeating: 2, count: 8) + [3, 3, 3, 3])
        guard case .wouldBlock = receiver.receive() else {
            Issue.record("a drained socket did not answer would-block")
            return
        }
        #expect(injection.receiveCalls == 3)
        // The next call asks the socket again.
        guard case .wouldBlock = receiver.receive() else {
            Issue.record("an empty socket did not answer would-block")
            return
        }
        #expect(injection.receiveCalls == 4)

        // An SDU sent now is received; then the end.
        _ = Self.packet(20).withUnsafeBytes { Glibc.send(sender, $0.baseAddress, $0.count, 0) }
        guard case .packet(let late) = receiver.receive() else {
            Issue.record("the late SDU was missing")
            return
        }
        #expect(late == Self.packet(20))
        guard case .wouldBlock = receiver.receive() else {
            Issue.record("a drained socket did not answer would-block")
            return
        }
        shutdown(sender, CInt(SHUT_WR))
        guard case .end(nil) = receiver.receive() else {
            Issue.record("the peer's close was not the end")
            return
        }
        guard case .end(nil) = receiver.receive() else {
            Issue.record("the end was not reported again")
            return
        }
    }

    @Test(
        "SDUs that come one at a time are taken with single recv calls, each answering would-block next without a call; recvmmsg comes back after 64"
    )
    func valuesOneAtATime() throws {
        let injection = FaultInjection()
        let (receiver, sender, socket) = try Self.receiver(holding: [], receiveMTU: 100, injection: injection)
        defer {
            close(sender)
            close(socket)
        }
        func send(_ indices: Range<Int>) {
            for index in indices {
                _ = Self.packet(index).withUnsafeBytes { Glibc.send(sender, $0.baseAddress, $0.count, 0) }
            }
        }
        func expectOneAtATime(_ indices: Range<Int>, sourceLocation: SourceLocation = #_sourceLocation) {
            for index in indices {
                Self.expectSDUs([Self.packet(index)], from: receiver, sourceLocation: sourceLocation)
                let calls = injection.receiveCalls
                guard case .wouldBlock = receiver.receive() else {
                    Issue.record("no would-block after SDU \(index)", sourceLocation: sourceLocation)
                    return
                }
                #expect(
                    injection.receiveCalls == calls, "asked the socket after SDU \(index)",
                    sourceLocation: sourceLocation)
            }
        }
        // Four recvmmsg calls that each bring one SDU.
        for index in 0..<PacketReceiver.loneBatchesBeforeSingles {
            send(index..<index + 1)
            expectOneAtATime(index..<index + 1)
        }
        #expect(injection.receiveMessagesCalls == 4)
        #expect(injection.receiveCalls == 4)

        // Then single recv calls, also for SDUs that arrive together (each is one more call).
        let singles = PacketReceiver.singleReceivesPerProbe
        for index in 4..<singles {
            send(index..<index + 1)
            expectOneAtATime(index..<index + 1)
        }
        send(singles..<singles + 4)
        expectOneAtATime(singles..<singles + 4)
        #expect(injection.receiveMessagesCalls == 4)
        #expect(injection.receiveCalls == 4 + singles)

        // After 64 single calls, recvmmsg again: a burst comes in one call.
        send(singles + 4..<singles + 7)
        Self.expectSDUs((singles + 4..<singles + 7).map(Self.packet), from: receiver)
        #expect(injection.receiveMessagesCalls == 5)
        #expect(injection.receiveCalls == 5 + singles)
        guard case .wouldBlock = receiver.receive() else {
            Issue.record("a drained socket did not answer would-block")
            return
        }
        #expect(injection.receiveCalls == 5 + singles)

        // The end reaches a receiver that takes SDUs one at a time, too.
        for index in 0..<PacketReceiver.loneBatchesBeforeSingles {
            send(index..<index + 1)
            expectOneAtATime(index..<index + 1)
        }
        shutdown(sender, CInt(SHUT_WR))
        guard case .end(nil) = receiver.receive() else {
            Issue.record("the peer's close was not the end")
            return
        }
        #expect(injection.receiveMessagesCalls == 9)
    }

    /// The address of an array's storage.
    static func storage(of array: [UInt8]) -> UnsafeRawPointer? {
        array.withUnsafeBytes { $0.baseAddress }
    }

    @Test(
        "An SDU handed back lends its storage to the next that fits; one its taker kept is never written over",
        arguments: [false, true])
    func recycledStorage(batching: Bool) throws {
        let injection = FaultInjection()
        let (receiver, sender, socket) = try Self.receiver(
            holding: [], receiveMTU: 100, injection: injection, batching: batching)
        defer {
            close(sender)
            close(socket)
        }
        func receive(_ sdu: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> [UInt8] {
            _ = sdu.withUnsafeBytes { Glibc.send(sender, $0.baseAddress, $0.count, 0) }
            guard case .packet(let packet) = receiver.receive() else {
                Issue.record("an SDU was missing", sourceLocation: sourceLocation)
                return []
            }
            #expect(packet == sdu, sourceLocation: sourceLocation)
            guard case .wouldBlock = receiver.receive() else {
                Issue.record("no would-block after the SDU", sourceLocation: sourceLocation)
                return packet
            }
            return packet
        }
        // Handed back with nobody else holding it: the next SDU arrives in the same storage.
        var first: [UInt8]? = receive([1, 2, 3, 4])
        let firstStorage = first.map(Self.storage(of:))
        receiver.recycle(first.take()!)
        let second = receive([5, 6, 7])
        #expect(Self.storage(of: second) == firstStorage)
        #expect(second.count == 3)

        // Kept by its taker: handing it back leaves it as it was, and the next SDU goes elsewhere.
        let kept = second
        receiver.recycle(second)
        let third = receive([8, 9, 10])
        #expect(kept == [5, 6, 7])
        #expect(Self.storage(of: third) != Self.storage(of: kept))

        // Larger than the storage kept: a new array, whole.
        receiver.recycle(third)
        let large = (0..<90).map { UInt8($0) }
        let fourth = receive(large)
        #expect(fourth == large)
        receiver.recycle(fourth)
        // Then a short one: its own bytes only.
        let fifth = receive([42])
        #expect(fifth == [42])
        #expect(kept == [5, 6, 7])
    }

    @Test("The receiver tells when the SDUs it handed out were all the socket held")
    func tookAll() throws {
        let injection = FaultInjection()
        let packets = (0..<3).map(Self.packet)
        let (receiver, sender, socket) = try Self.receiver(holding: packets, receiveMTU: 100, injection: injection)
        defer {
            close(sender)
            close(socket)
        }
        var tookAllAfter: [Bool] = []
        for packet in packets {
            Self.expectSDUs([packet], from: receiver)
            tookAllAfter.append(receiver.tookAll)
        }
        // Three in one recvmmsg with room for eight: the socket had no more after the third.
        #expect(tookAllAfter == [false, false, true])
        guard case .wouldBlock = receiver.receive() else {
            Issue.record("a drained socket did not answer would-block")
            return
        }
        #expect(!receiver.tookAll, "the next receive would ask the socket")
        _ = Self.packet(3).withUnsafeBytes { Glibc.send(sender, $0.baseAddress, $0.count, 0) }
        Self.expectSDUs([Self.packet(3)], from: receiver)
        #expect(receiver.tookAll)
    }

    @Test("An SDU over the receive MTU in a batch ends the stream after the SDUs before it")
    func oversizedSDUInABatch() throws {
        let injection = FaultInjection()
        let packets = [Self.packet(0), Self.packet(1), [UInt8](repeating: 7, count: 80), Self.packet(3)]
        let (receiver, sender, socket) = try Self.receiver(holding: packets, receiveMTU: 64, injection: injection)
        defer {
            close(sender)
            close(socket)
        }
        Self.expectSDUs(Array(packets.prefix(2)), from: receiver)
        guard case .end(let error?) = receiver.receive() else {
            Issue.record("the oversized SDU did not end the stream")
            return
        }
        #expect(error.reason == .protocolViolation)
        #expect(error.message.contains("80 bytes"))
        guard case .end(.some) = receiver.receive() else {
            Issue.record("the end was not reported again")
            return
        }
    }

    @Test("A reset the socket reports ends the stream after the SDUs queued before it")
    func resetAfterABatch() throws {
        let injection = FaultInjection()
        let (receiver, sender, socket) = try Self.receiver(
            holding: [Self.packet(0), Self.packet(1)], receiveMTU: 100, injection: injection)
        defer {
            close(sender)
            close(socket)
        }
        // The kernel reports the reset on the call after the SDUs (it keeps an error met after
        // the first message for the next call); the fault stands in for it.
        guard case .packet = receiver.receive(), case .packet = receiver.receive() else {
            Issue.record("an SDU was missing")
            return
        }
        // The batch found the socket empty: the next call answers without asking it.
        guard case .wouldBlock = receiver.receive() else {
            Issue.record("a drained socket did not answer would-block")
            return
        }
        injection.failReceives(.error(ECONNRESET))
        guard case .end(let error?) = receiver.receive() else {
            Issue.record("the reset did not end the stream")
            return
        }
        #expect(error.errno?.category == .disconnection)
    }

    @Test("A receiver that does not batch (an L2CAP channel's) receives one SDU per recv")
    func withoutBatching() throws {
        let injection = FaultInjection()
        let packets = (0..<3).map(Self.packet)
        let (receiver, sender, socket) = try Self.receiver(
            holding: packets, receiveMTU: 100, injection: injection, batching: false)
        defer {
            close(sender)
            close(socket)
        }
        Self.expectSDUs(packets, from: receiver)
        #expect(injection.receiveCalls == 3)
        // Each call asks the socket.
        guard case .wouldBlock = receiver.receive() else {
            Issue.record("an empty socket did not answer would-block")
            return
        }
        #expect(injection.receiveCalls == 4)
    }

    @Test("A receive MTU over 4 KB receives one SDU per recv, and no batch", arguments: [4097, 65_535])
    func largeMTUsReceiveOneByOne(mtu: Int) throws {
        #expect(PacketReceiver.batchCapacity(receiveMTU: mtu) == 1)
        let injection = FaultInjection()
        let packets = (0..<3).map(Self.packet)
        let (receiver, sender, socket) = try Self.receiver(holding: packets, receiveMTU: mtu, injection: injection)
        defer {
            close(sender)
            close(socket)
        }
        Self.expectSDUs(packets, from: receiver)
        #expect(injection.receiveCalls == 3)
    }
}
