import AbleTestSupport
import Testing

@testable import AbleCore

/// The lock behind ``Peripheral``'s one-operation-at-a-time rule.
@Suite(.timeLimit(.minutes(1)))
struct FIFOLockTests {
    /// Records who is inside the lock; `run` suspends in the middle, so an overlap would show.
    actor Log {
        private(set) var order: [Int] = []
        private(set) var mostInside = 0
        private var inside = 0

        func run(_ number: Int) async {
            inside += 1
            mostInside = max(mostInside, inside)
            order.append(number)
            for _ in 0..<5 { await Task.yield() }
            inside -= 1
        }
    }

    @Test func operationsRunOneAtATimeInTheOrderTheyAskedFor() async throws {
        let lock = FIFOLock()
        let log = Log()
        var tasks: [Task<Void, any Error>] = []
        // The test holds the lock while the others line up, one after another.
        try await lock.withLock {
            for number in 1...5 {
                tasks.append(Task { try await lock.withLock { await log.run(number) } })
                try await waitUntil { lock.waiterCount == number }
            }
        }
        for task in tasks { try await task.value }
        #expect(await log.order == [1, 2, 3, 4, 5])
        #expect(await log.mostInside == 1)
    }

    @Test func cancellingAQueuedOperationTakesItOutOfLineAtOnce() async throws {
        let lock = FIFOLock()
        let log = Log()
        var tasks: [Task<Void, any Error>] = []
        try await lock.withLock {
            for number in 1...3 {
                tasks.append(Task { try await lock.withLock { await log.run(number) } })
                try await waitUntil { lock.waiterCount == number }
            }
            tasks[1].cancel()
            // Thrown while the lock is still held: the cancelled caller does not wait for its turn.
            await #expect(throws: CancellationError.self) { try await tasks[1].value }
            #expect(lock.waiterCount == 2)
        }
        try await tasks[0].value
        try await tasks[2].value
        #expect(await log.order == [1, 3])
    }

    @Test func cancellingARunningOperationCancelsItAndFreesTheLock() async throws {
        let lock = FIFOLock()
        let running = Locked(false)
        let task = Task {
            try await lock.withLock {
                running.value = true
                try await Task.sleep(for: .seconds(60))
            }
        }
        try await waitUntil { running.value }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        try await lock.withLock {}
    }

    @Test func aTaskCancelledBeforeItAsksRunsNothing() async throws {
        let lock = FIFOLock()
        let ran = Locked(false)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await lock.withLock { ran.value = true }
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(!ran.value)
    }

    @Test func submittedWorkKeepsItsPlaceInLine() async throws {
        let lock = FIFOLock()
        let log = Log()
        var tasks: [Task<Void, any Error>] = []
        try await lock.withLock {
            tasks.append(Task { try await lock.withLock { await log.run(1) } })
            try await waitUntil { lock.waiterCount == 1 }
            lock.submit { await log.run(2) }
            tasks.append(Task { try await lock.withLock { await log.run(3) } })
            try await waitUntil { lock.waiterCount == 3 }
        }
        for task in tasks { try await task.value }
        await lock.drain()
        #expect(await log.order == [1, 2, 3])
        #expect(await log.mostInside == 1)
    }

    @Test func theStateMachineHandsTheLockOnInOrderAndDropsCancelledTickets() {
        var machine = FIFOLockStateMachine<String>()
        let locked = machine.lockIfFree()
        let lockedAgain = machine.lockIfFree()
        #expect(locked && !lockedAgain)
        let a = machine.takeTicket()
        let b = machine.takeTicket()
        let c = machine.takeTicket()
        let d = machine.takeTicket()
        #expect(machine.arrive(a, with: "a") == .wait)
        #expect(machine.arrive(b, with: "b") == .wait)
        // Cancelled between taking its ticket and arriving: it never waits.
        #expect(machine.cancel(c) == nil)
        #expect(machine.arrive(c, with: "c") == .cancelled)
        #expect(machine.arrive(d, with: "d") == .wait)
        #expect(machine.cancel(b) == "b")
        #expect(machine.waiterCount == 2)
        #expect(machine.unlock() == "a")
        // The holder's cancellation is its operation's business.
        #expect(machine.cancel(a) == nil)
        #expect(machine.unlock() == "d")
        #expect(machine.unlock() == nil)
        let lockedWhenFree = machine.lockIfFree()
        #expect(lockedWhenFree)
    }
}
