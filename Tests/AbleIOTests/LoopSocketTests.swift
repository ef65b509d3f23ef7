import AbleIO
import AbleTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `LoopSocket`: a socket watched by an `EventLoop`, whose interest changes from any thread.
@Suite(.timeLimit(.minutes(1)))
struct LoopSocketTests {
    /// A connected, nonblocking `AF_UNIX`/`SOCK_SEQPACKET` pair.
    static func pair() throws -> (Int32, Int32) {
        var descriptors: [Int32] = [-1, -1]
        let made = socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &descriptors)
        try #require(made == 0)
        return (descriptors[0], descriptors[1])
    }

    static func send(_ byte: UInt8, to socket: Int32) {
        var value = byte
        #expect(Glibc.send(socket, &value, 1, Int32(MSG_NOSIGNAL)) == 1)
    }

    /// One message, or 0 at the end, or -1 when none is there.
    static func receive(_ socket: Int32) -> Int {
        var buffer = [UInt8](repeating: 0, count: 16)
        return buffer.withUnsafeMutableBytes { Glibc.recv(socket, $0.baseAddress, $0.count, 0) }
    }

    /// Cancels `socket` and waits until the loop has let go of it.
    static func release(_ socket: LoopSocket) async throws {
        let released = Locked(false)
        socket.cancel { released.value = true }
        try await waitUntil { released.value }
    }

    static func uniqueName() -> String {
        "able.s.\(UInt32.random(in: 0..<0xFF_FFFF))"
    }

    /// A second socket on the same loop, to learn that the loop has waited in `epoll_wait` since
    /// a moment: its handler runs only from a wait that began after the byte was sent.
    final class Marker: Sendable {
        let socket: LoopSocket
        let peer: Int32
        let seen = Locked(0)

        init(loop: EventLoop) throws {
            let (mine, peer) = try LoopSocketTests.pair()
            self.peer = peer
            socket = LoopSocket(descriptor: mine, loop: loop)
            let seen = seen
            socket.start(
                interest: .read, readable: { if LoopSocketTests.receive(mine) > 0 { seen.value += 1 } }, writable: {})
        }

        /// Returns once the loop has waited for its descriptors again.
        func waitForAPoll() async throws {
            let before = seen.value
            LoopSocketTests.send(1, to: peer)
            try await waitUntil { seen.value > before }
        }

        func close() async throws {
            try await LoopSocketTests.release(socket)
            Glibc.close(socket.descriptor)
            Glibc.close(peer)
        }

        /// ``waitForAPoll()``, then ``close()``: the loop has settled into waiting for events.
        func waitForAPollThenClose() async throws {
            try await waitForAPoll()
            try await close()
        }
    }

    /// A loop with a ``Marker``, and a socket pair whose first end is to be watched on it.
    struct Rig {
        let loop = EventLoop(threadName: LoopSocketTests.uniqueName())
        let marker: Marker
        let mine: Int32
        let peer: Int32
        let socket: LoopSocket

        init() throws {
            marker = try Marker(loop: loop)
            (mine, peer) = try LoopSocketTests.pair()
            socket = LoopSocket(descriptor: mine, loop: loop)
        }

        /// Closes both ends once `socket` is released, and the marker.
        func close() async throws {
            Glibc.close(mine)
            Glibc.close(peer)
            try await marker.close()
        }
    }

    @Test func aReadableSocketIsHandledOnTheLoopAndAgainWhileDataIsLeftUnread() async throws {
        let name = Self.uniqueName()
        let loop = EventLoop(threadName: name)
        let (mine, peer) = try Self.pair()
        let socket = LoopSocket(descriptor: mine, loop: loop)
        let received = Locked(0)
        let offLoop = Locked(0)
        // One message per call: the rest must be reported again (level-triggered).
        socket.start(
            interest: .read,
            readable: {
                if !loop.isOnLoop { offLoop.value += 1 }
                if Self.receive(mine) > 0 { received.value += 1 }
            }, writable: {})
        // A started socket starts the loop's thread (which names itself as it starts).
        try await waitUntil { ThreadCensus.threads(named: name) == 1 }
        for byte in 1...3 { Self.send(UInt8(byte), to: peer) }
        try await waitUntil { received.value == 3 }
        #expect(offLoop.value == 0)
        try await Self.release(socket)
        try await waitUntil { ThreadCensus.threads(named: name) == 0 }
        close(mine)
        close(peer)
    }

    @Test func withReadingOffAHungUpSocketIsNotHandledUntilReadingIsOnAgain() async throws {
        let rig = try Rig()
        let (marker, mine, peer, socket) = (rig.marker, rig.mine, rig.peer, rig.socket)
        let calls = Locked(0)
        let ended = Locked(false)
        socket.start(
            interest: .read,
            readable: {
                calls.value += 1
                switch Self.receive(mine) {
                case 0:
                    ended.value = true
                    socket.set(.read, false)
                case 1...:
                    // Stop after the first message, as a full buffer would.
                    socket.set(.read, false)
                default:
                    break
                }
            }, writable: {})
        Self.send(1, to: peer)
        try await waitUntil { calls.value == 1 }
        // The peer hangs up: `epoll` reports that whatever the interest, unless the socket is out.
        shutdown(peer, Int32(SHUT_RDWR))
        try await marker.waitForAPoll()
        try await marker.waitForAPoll()
        #expect(calls.value == 1, "a socket nobody reads must not be handled")
        socket.set(.read, true)
        try await waitUntil { ended.value }
        try await marker.waitForAPoll()
        #expect(calls.value == 2, "handled once for the end, then no more with reading off")
        try await Self.release(socket)
        try await rig.close()
    }

    @Test func cancellingRunsItsClosureOnTheLoopAndNoHandlerAfterIt() async throws {
        let rig = try Rig()
        let (loop, marker, mine, peer, socket) = (rig.loop, rig.marker, rig.mine, rig.peer, rig.socket)
        let calls = Locked(0)
        socket.start(interest: [.read, .write], readable: { calls.value += 1 }, writable: { calls.value += 1 })
        try await waitUntil { calls.value > 0 }
        let releasedOnLoop = Locked<Bool?>(nil)
        socket.cancel { releasedOnLoop.value = loop.isOnLoop }
        socket.cancel { Issue.record("only the first cancel counts") }
        try await waitUntil { releasedOnLoop.value != nil }
        #expect(releasedOnLoop.value == true)
        let after = calls.value
        Self.send(1, to: peer)
        socket.set(.read, true)
        try await marker.waitForAPoll()
        #expect(calls.value == after)
        #expect(fcntl(mine, F_GETFD) >= 0, "the owner closes the descriptor, not the watch")
        try await rig.close()
    }

    @Test func aDescriptorEpollRefusesReachesTheHandlerInsteadOfNever() async throws {
        let loop = EventLoop(threadName: Self.uniqueName())
        var template = Array("/tmp/able-loop-XXXXXX".utf8CString)
        let file = mkstemp(&template)
        try #require(file >= 0)
        unlink(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        let socket = LoopSocket(descriptor: file, loop: loop)
        let calls = Locked(0)
        socket.start(interest: .read, readable: { calls.value += 1 }, writable: {})
        try await waitUntil { calls.value >= 1 }
        try await Self.release(socket)
        close(file)
    }

    @Test func interestTurnedOnAndOffFromManyThreadsEndsAsTheLastChangeSaid() async throws {
        let rig = try Rig()
        let (marker, socket) = (rig.marker, rig.socket)
        let writable = Locked(0)
        // Always writable: every turn with writing on calls the handler.
        socket.start(interest: [], readable: {}, writable: { writable.value += 1 })
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for round in 0..<500 { socket.set(.write, round % 2 == 0) }
                }
            }
        }
        socket.set(.write, false)
        try await marker.waitForAPoll()
        let settled = writable.value
        try await marker.waitForAPoll()
        #expect(writable.value == settled, "writing is off: the writable socket is no longer handled")
        socket.set(.write, true)
        try await waitUntil { writable.value > settled }
        try await Self.release(socket)
        try await rig.close()
    }
}
