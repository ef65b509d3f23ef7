import AbleStreams
import AbleTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// When `EventLoop` writes its `eventfd`, and when not.
@Suite(.timeLimit(.minutes(1)))
struct EventLoopWakeTests {
    /// The loop's thread enqueues work for itself all the time (a reply resuming a call made on
    /// the loop, a consumer that prefers the loop woken by a socket's handler): that work runs on
    /// the next turn and must not write the loop's `eventfd`, which would cost a turn and two
    /// system calls per event.
    @Test func workThatAHandlerEnqueuesOnItsOwnLoopWakesNothing() async throws {
        let loop = EventLoop(threadName: LoopSocketTests.uniqueName())
        let (mine, peer) = try LoopSocketTests.pair()
        let socket = LoopSocket(descriptor: mine, loop: loop)
        let jobsRun = Locked(0)
        let jobsOffLoop = Locked(0)
        socket.start(
            interest: .read,
            readable: {
                guard LoopSocketTests.receive(mine) > 0 else { return }
                loop.execute {
                    if !loop.isOnLoop { jobsOffLoop.value += 1 }
                    jobsRun.value += 1
                }
            }, writable: {})
        // Each byte arrives while the loop sleeps in `epoll_wait`, as a paced notification does.
        try await LoopSocketTests.Marker(loop: loop).waitForAPollThenClose()
        let wakesBefore = loop.wakeCount
        for round in 1...20 {
            LoopSocketTests.send(UInt8(round), to: peer)
            try await waitUntil { jobsRun.value == round }
        }
        #expect(loop.wakeCount == wakesBefore, "the handlers' own jobs wrote the eventfd")
        #expect(jobsOffLoop.value == 0)
        // Work from another thread still wakes a sleeping loop.
        let ran = Locked(false)
        try await Task.sleep(for: .milliseconds(20))
        loop.execute { ran.value = true }
        try await waitUntil { ran.value }
        #expect(loop.wakeCount > wakesBefore)
        try await LoopSocketTests.release(socket)
        close(mine)
        close(peer)
    }
}
