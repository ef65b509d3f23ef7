import AbleIO
import AbleTestSupport
import Foundation
import Testing

@testable import AbleCore

/// The channel's error paths, driven by socket calls that fail on cue (`FaultInjection`).
struct L2CAPFaultInjectionTests {
    @Test(
        "A send that finds the socket busy is retried and arrives once, in order",
        .timeLimit(.minutes(1)),
        arguments: [
            ([FaultInjection.Fault.error(EAGAIN)], 1),
            ([.error(EAGAIN), .error(EAGAIN), .error(EAGAIN)], 1),
            ([.error(EINTR)], 0),
            ([.error(EINTR), .error(EAGAIN), .error(EINTR)], 1),
        ]
    )
    func transientSendErrors(faults: [FaultInjection.Fault], expectedWaits: Int) async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        for fault in faults { injection.failSends(fault) }
        try await faulty.send([1])
        try await faulty.send([2])
        var packets = peer.packets.makeAsyncIterator()
        #expect(try await packets.next() == [1])
        #expect(try await packets.next() == [2])
        #expect(faulty.sendWaitCount == expectedWaits)
        #expect(injection.sendCalls == faults.count + 2)
        await faulty.close()
        #expect(try await packets.next() == nil)
        await peer.close()
    }

    @Test(
        "A receive that is interrupted or woken for nothing loses no packet",
        .timeLimit(.minutes(1)),
        arguments: [
            [FaultInjection.Fault.error(EINTR)],
            [.error(EAGAIN)],
            [.error(EINTR), .error(EINTR), .error(EAGAIN)],
        ]
    )
    func transientReceiveErrors(faults: [FaultInjection.Fault]) async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        for fault in faults { injection.failReceives(fault) }
        var packets = faulty.packets.makeAsyncIterator()
        try await peer.send([7, 7])
        #expect(try await packets.next() == [7, 7])
        try await peer.send([8])
        #expect(try await packets.next() == [8])
        #expect(injection.pendingFaults == 0)
        await peer.close()
        #expect(try await packets.next() == nil)
        await faulty.close()
    }

    @Test(
        "A reset reported by recv ends the stream with disconnected after the SDUs queued before it",
        .timeLimit(.minutes(1))
    )
    func resetOnReceive() async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        var packets = faulty.packets.makeAsyncIterator()
        try await peer.send([1])
        #expect(try await packets.next() == [1])
        injection.failReceives(.error(ECONNRESET))
        // Wakes the read source; its recv reports the reset, as the kernel does once, and the
        // next recv still returns this SDU, which was queued before.
        try await peer.send([2])
        #expect(try await packets.next() == [2])
        let error = await #expect(throws: BluetoothError.self) { try await packets.next() }
        #expect(error?.code == .disconnected)
        #expect((error?.cause as? Errno)?.rawValue == ECONNRESET)
        #expect(try await packets.next() == nil)
        let sendError = await #expect(throws: BluetoothError.self) { try await faulty.send([3]) }
        #expect(sendError?.code == .disconnected)
        await faulty.close()
        await peer.close()
    }

    @Test(
        "A send that fails for good throws, and every later send throws the same without calling the socket",
        .timeLimit(.minutes(1)),
        arguments: [
            (FaultInjection.Fault.error(ECONNRESET), BluetoothError.Code.disconnected),
            (.error(EPIPE), .disconnected),
            (.error(ENOBUFS), .failed),
            (.short(3), .internalError),
        ]
    )
    func fatalSendErrors(fault: FaultInjection.Fault, code: BluetoothError.Code) async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        injection.failSends(fault)
        let first = await #expect(throws: BluetoothError.self) { try await faulty.send([1, 2, 3, 4, 5]) }
        #expect(first?.code == code)
        let calls = injection.sendCalls
        let second = await #expect(throws: BluetoothError.self) { try await faulty.send([6]) }
        #expect(second?.code == code)
        #expect(injection.sendCalls == calls)
        await faulty.close()
        await peer.close()
    }

    @Test("A send the socket refuses as too long fails alone; the channel goes on", .timeLimit(.minutes(1)))
    func messageTooLong() async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        injection.failSends(.error(EMSGSIZE))
        let error = await #expect(throws: BluetoothError.self) { try await faulty.send([1]) }
        #expect(error?.code == .valueTooLong)
        try await faulty.send([2])
        var packets = peer.packets.makeAsyncIterator()
        #expect(try await packets.next() == [2])
        await faulty.close()
        await peer.close()
    }

    @Test("A short write leaves the peer a truncated SDU and ends sending", .timeLimit(.minutes(1)))
    func shortWrite() async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        injection.failSends(.short(2))
        let error = await #expect(throws: BluetoothError.self) { try await faulty.send([1, 2, 3, 4]) }
        #expect(error?.code == .internalError)
        var packets = peer.packets.makeAsyncIterator()
        #expect(try await packets.next() == [1, 2])
        await faulty.close()
        #expect(try await packets.next() == nil)
        await peer.close()
    }

    // MARK: Several packets in one call (sendmmsg)

    @Test("Packets sent together go in one sendmmsg call and arrive whole, in order", .timeLimit(.minutes(1)))
    func gatheredSend() async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        let batch = (1...10).map { [UInt8]($0...($0 + 2)) }
        try await faulty.send(contentsOf: batch)
        #expect(injection.sendMessagesCalls == 1)
        #expect(injection.sendCalls == 0)
        var packets = peer.packets.makeAsyncIterator()
        for expected in batch { #expect(try await packets.next() == expected) }
        await faulty.close()
        #expect(try await packets.next() == nil)
        await peer.close()
    }

    @Test(
        "A sendmmsg that finds the socket busy or is interrupted is retried; every packet arrives once, in order",
        .timeLimit(.minutes(1)),
        arguments: [
            ([FaultInjection.Fault.error(EAGAIN)], 1),
            ([.error(EINTR)], 0),
            ([.error(EINTR), .error(EAGAIN), .error(EAGAIN)], 1),
        ]
    )
    func transientGatheredSendErrors(faults: [FaultInjection.Fault], expectedWaits: Int) async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        for fault in faults { injection.failSendMessages(fault) }
        let batch = (1...5).map { [UInt8($0)] }
        try await faulty.send(contentsOf: batch)
        var packets = peer.packets.makeAsyncIterator()
        for expected in batch { #expect(try await packets.next() == expected) }
        #expect(faulty.sendWaitCount == expectedWaits)
        #expect(injection.pendingFaults == 0)
        await faulty.close()
        await peer.close()
    }

    @Test(
        "A packet refused as too long in a sendmmsg ends its send alone; the sends queued behind it go on",
        .timeLimit(.minutes(1)))
    func gatheredMessageTooLong() async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        // The first call finds the socket busy, so the send queues; the write handler's sendmmsg
        // then has the refused packet first.
        injection.failSendMessages(.error(EAGAIN), .error(EMSGSIZE))
        let first = Task { try await faulty.send(contentsOf: [[1], [2]]) }
        try await waitUntil { faulty.sendWaitCount == 1 }
        let second = Task { try await faulty.send(contentsOf: [[3], [4]]) }
        let error = await #expect(throws: BluetoothError.self) { try await first.value }
        #expect(error?.code == .valueTooLong)
        try await second.value
        var packets = peer.packets.makeAsyncIterator()
        #expect(try await packets.next() == [3])
        #expect(try await packets.next() == [4])
        await faulty.close()
        await peer.close()
    }

    @Test("A sendmmsg that reports a packet cut short ends sending", .timeLimit(.minutes(1)))
    func gatheredShortWrite() async throws {
        let injection = FaultInjection()
        let (faulty, peer) = try injection.makePair()
        injection.failSendMessages(.short(1))
        let error = await #expect(throws: BluetoothError.self) {
            try await faulty.send(contentsOf: [[1, 2, 3], [4, 5, 6]])
        }
        #expect(error?.code == .internalError)
        let later = await #expect(throws: BluetoothError.self) { try await faulty.send([7]) }
        #expect(later?.code == .internalError)
        await faulty.close()
        await peer.close()
    }
}
