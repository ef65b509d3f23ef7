import AbleIO
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

    /// Work from other threads always runs, however its submits meet the loop: asleep in
    /// `epoll_wait`, deciding to sleep, or just woken by its own socket (when it clears its
    /// sleeping flag without the inbox's lock). Each submitter waits for its job before the next,
    /// so most submits find the loop asleep; one also keeps the socket busy. A wake-up lost
    /// between those steps leaves a job waiting forever, and the time limit fails the test.
    ///
    /// The socket only wakes the loop: its handler drains it, and a poke that finds it full (the
    /// loop runs up to 16 turns of jobs between two looks at its descriptors, and its queue holds
    /// `net.unix.max_dgram_qlen` messages, 10 by default) is simply not sent.
    @Test func workFromOtherThreadsAlwaysWakesTheLoop() async throws {
        let loop = EventLoop(threadName: LoopSocketTests.uniqueName())
        let (mine, peer) = try LoopSocketTests.pair()
        let socket = LoopSocket(descriptor: mine, loop: loop)
        socket.start(interest: .read, readable: { while LoopSocketTests.receive(mine) > 0 {} }, writable: {})
        let rounds = 2_000
        let ran = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for submitter in 0..<3 {
                group.addTask {
                    for round in 0..<rounds {
                        if submitter == 0 {
                            var poke = UInt8(truncatingIfNeeded: round)
                            _ = Glibc.send(peer, &poke, 1, Int32(MSG_NOSIGNAL))
                        }
                        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                            loop.execute {
                                ran.value += 1
                                done.resume()
                            }
                        }
                    }
                }
            }
        }
        #expect(ran.value == 3 * rounds)
        try await LoopSocketTests.release(socket)
        close(mine)
        close(peer)
    }

    /// The loop's thread ends once its last client has left, however the release meets the loop:
    /// asleep in `epoll_wait` (having decided so without the inbox's lock), running a job, or
    /// about to decide. A release the loop misses leaves its thread waiting for ever, still there
    /// when the test looks for it.
    @Test func theLoopsThreadEndsWhenItsLastClientLeavesFromAnotherThread() async throws {
        for round in 0..<150 {
            let name = LoopSocketTests.uniqueName()
            let loop = EventLoop(threadName: name)
            loop.retainClient()
            switch round % 3 {
            case 0: try await waitUntil { Self.threadExists(named: name) }
            case 1: loop.execute { usleep(200) }
            default: break
            }
            loop.releaseClient()
            try await waitUntil { !Self.threadExists(named: name) }
            if Self.threadExists(named: name) { return }
        }
    }

    /// Whether a thread of this process bears `name`.
    static func threadExists(named name: String) -> Bool {
        guard let directory = opendir("/proc/self/task") else { return false }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let task = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard task.first?.isNumber == true,
                let file = fopen("/proc/self/task/\(task)/comm", "r")
            else { continue }
            defer { fclose(file) }
            var line = [CChar](repeating: 0, count: 32)
            guard fgets(&line, Int32(line.count), file) != nil else { continue }
            let comm = String(
                decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if comm == name { return true }
        }
        return false
    }
}
