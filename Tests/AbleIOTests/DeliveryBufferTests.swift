import AbleIO
import AbleTestSupport
import Dispatch
import Foundation
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(1)))
struct DeliveryBufferTests {
    @Test func valuesArriveInOrderThenTheStreamEnds() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 100, policy: .dropNewest)
        for value in 0..<50 { #expect(buffer.yield(value) == .enqueued) }
        buffer.finish()
        #expect(buffer.yield(99) == .terminated)
        var received: [Int] = []
        while let value = try await buffer.next() { received.append(value) }
        #expect(received == Array(0..<50))
    }

    @Test func aFullBufferDropsTheNewestOrTheOldestAndCountsIt() async throws {
        let keepOldest = DeliveryBuffer<Int>(limit: 3, policy: .dropNewest)
        let keepNewest = DeliveryBuffer<Int>(limit: 3, policy: .dropOldest)
        for value in 0..<5 {
            #expect(keepOldest.yield(value) == (value < 3 ? .enqueued : .dropped))
            #expect(keepNewest.yield(value) == (value < 3 ? .enqueued : .dropped))
        }
        keepOldest.finish()
        keepNewest.finish()
        var oldest: [Int] = []
        while let value = try await keepOldest.next() { oldest.append(value) }
        var newest: [Int] = []
        while let value = try await keepNewest.next() { newest.append(value) }
        #expect(oldest == [0, 1, 2])
        #expect(newest == [2, 3, 4])
        #expect(keepOldest.droppedCount == 2)
        #expect(keepNewest.droppedCount == 2)
    }

    @Test func bufferedValuesComeBeforeTheError() async throws {
        struct Gone: Error {}
        let buffer = DeliveryBuffer<Int>(limit: 10, policy: .dropNewest)
        buffer.yield(1)
        buffer.yield(2)
        buffer.finish(throwing: Gone())
        #expect(try await buffer.next() == 1)
        #expect(try await buffer.next() == 2)
        await #expect(throws: Gone.self) { try await buffer.next() }
        // Thrown once: the stream is over.
        #expect(try await buffer.next() == nil)
    }

    @Test func aWaitingConsumerIsWokenByAYield() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 10, policy: .dropNewest)
        let consumer = Task { try await buffer.next() }
        try await waitUntil { buffer.isConsumerWaiting }
        buffer.yield(7)
        #expect(try await consumer.value == 7)
    }

    @Test func cancellingTheWaitingConsumerEndsTheStreamOnce() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 10, policy: .dropNewest)
        let terminations = Atomic<Int>(0)
        buffer.onTermination { terminations.add(1, ordering: .relaxed) }
        let consumer = Task { try await buffer.next() }
        try await waitUntil { buffer.isConsumerWaiting }
        consumer.cancel()
        #expect(try await consumer.value == nil)
        buffer.finish()
        #expect(buffer.yield(1) == .terminated)
        #expect(terminations.load(ordering: .relaxed) == 1)
    }

    @Test func aConsumerCancelledBeforeItAsksGetsTheBufferedValuesThenTheEnd() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 10, policy: .dropNewest)
        let terminations = Atomic<Int>(0)
        buffer.onTermination { terminations.add(1, ordering: .relaxed) }
        buffer.yield(1)
        buffer.yield(2)
        let consumer = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var received: [Int] = []
            while let value = try await buffer.next() {
                received.append(value)
                // A producer that keeps up does not keep a cancelled consumer going.
                buffer.yield(value + 10)
            }
            return received
        }
        #expect(try await consumer.value == [1, 2])
        #expect(terminations.load(ordering: .relaxed) == 1)
        #expect(try await buffer.next() == nil)
    }

    @Test func aBatchWakesTheConsumerOnceWhenItEnds() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 100, policy: .dropNewest)
        let consumer = Task {
            var received: [Int] = []
            while received.count < 30, let value = try await buffer.next() { received.append(value) }
            return received
        }
        try await waitUntil { buffer.isConsumerWaiting }
        // The batch runs on a thread of its own, as a connection's dispatch does.
        let stillWaitingAtTheEnd = await withCheckedContinuation { continuation in
            DispatchQueue(label: "batch").async {
                let waiting = DeliveryBatch().run {
                    for value in 0..<30 { buffer.yield(value) }
                    // Nothing woke the consumer yet: its values wait for the end of the batch.
                    return buffer.isConsumerWaiting && buffer.bufferedCount == 30
                }
                continuation.resume(returning: waiting)
            }
        }
        #expect(stillWaitingAtTheEnd)
        #expect(try await consumer.value == Array(0..<30))
    }

    /// One batch, run again and again as a connection's is, wakes at the end of each run the
    /// consumers that run held back.
    @Test func aBatchRunAgainWakesTheConsumersOfEachRun() async throws {
        // Only ever touched on the queue below, one run at a time.
        nonisolated(unsafe) let batch = DeliveryBatch()
        let queue = DispatchQueue(label: "batch")
        for round in 0..<3 {
            let buffers = (0..<2).map { _ in DeliveryBuffer<Int>(limit: 10, policy: .dropNewest) }
            let consumers = buffers.map { buffer in Task { try await buffer.next() } }
            for buffer in buffers { try await waitUntil { buffer.isConsumerWaiting } }
            let heldBack = await withCheckedContinuation { continuation in
                queue.async {
                    let held = batch.run {
                        for (index, buffer) in buffers.enumerated() { buffer.yield(round * 10 + index) }
                        return buffers.allSatisfy(\.isConsumerWaiting)
                    }
                    continuation.resume(returning: held)
                }
            }
            #expect(heldBack)
            for (index, consumer) in consumers.enumerated() {
                #expect(try await consumer.value == round * 10 + index)
            }
        }
    }

    /// A batch started partway through a run (``DeliveryBatch/begin()``) holds back the wake-ups
    /// of what is yielded until ``DeliveryBatch/end()``; a `begin` while a batch runs on the thread
    /// starts nothing, and its values join the running batch.
    @Test func aBatchBegunPartwayHoldsBackItsWakeUpsAndDoesNotNest() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 10, policy: .dropNewest)
        let consumer = Task {
            var received: [Int] = []
            while received.count < 3, let value = try await buffer.next() { received.append(value) }
            return received
        }
        try await waitUntil { buffer.isConsumerWaiting }
        let observed = await withCheckedContinuation { continuation in
            DispatchQueue(label: "batch").async {
                let outer = DeliveryBatch()
                let inner = DeliveryBatch()
                let began = outer.begin()
                let innerBegan = inner.begin()
                buffer.yield(1)
                buffer.yield(2)
                let waitingInBatch = buffer.isConsumerWaiting
                let current = DeliveryBatch.current === outer
                outer.end()
                let afterEnd = DeliveryBatch.current == nil
                continuation.resume(returning: (began, innerBegan, waitingInBatch, current, afterEnd))
            }
        }
        #expect(observed.0, "a batch began on a thread that ran none")
        #expect(!observed.1, "a second batch began inside the first")
        #expect(observed.2, "a yield inside the batch woke the consumer before the batch ended")
        #expect(observed.3, "the running batch was not the one that began first")
        #expect(observed.4, "the thread still had a batch after it ended")
        buffer.yield(3)
        #expect(try await consumer.value == [1, 2, 3])
    }

    @Test func outsideABatchAYieldWakesAtOnce() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 10, policy: .dropNewest)
        let consumer = Task { try await buffer.next() }
        try await waitUntil { buffer.isConsumerWaiting }
        let wokenAtOnce = await withCheckedContinuation { continuation in
            DispatchQueue(label: "producer").async {
                buffer.yield(1)
                continuation.resume(returning: !buffer.isConsumerWaiting)
            }
        }
        #expect(wokenAtOnce)
        #expect(try await consumer.value == 1)
    }

    @Test func aHeldValueCountsAsAPendingHandOffUntilReleased() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 10, policy: .dropNewest)
        #expect(!buffer.hasPendingHandOff)
        buffer.yield(1)
        buffer.yield(2)
        #expect(!buffer.hasPendingHandOff, "nobody waits for these values")
        #expect(try await buffer.next() == 1)
        #expect(try await buffer.nextHeld() == 2)
        #expect(buffer.bufferedCount == 0)
        #expect(buffer.hasPendingHandOff)
        buffer.releaseHeld()
        #expect(!buffer.hasPendingHandOff)
    }
    // MARK: A handler instead of iteration

    struct HandlerGone: Error {}

    @Test func aHandlerGetsTheBufferedValuesThenEachYieldOnItsThreadThenTheEnd() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 100, policy: .dropNewest)
        for value in 0..<3 { buffer.yield(value) }
        let received = Lock<[Int]>([])
        let consumer = Task { try await buffer.forEach { value in received.withLock { $0.append(value) } } }
        try await waitUntil { received.withLock { $0.count } == 3 }
        for value in 3..<10 {
            buffer.yield(value)
            // Delivered inside the yield: nothing is buffered, nothing is pending.
            #expect(received.withLock { $0.last } == value)
        }
        #expect(buffer.bufferedCount == 0)
        buffer.finish(throwing: HandlerGone())
        await #expect(throws: HandlerGone.self) { try await consumer.value }
        #expect(received.withLock { $0 } == Array(0..<10))
        #expect(buffer.yield(10) == .terminated)
    }

    @Test func twoProducersNeverOverlapInTheHandlerAndKeepTheirOrder() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 100_000, policy: .dropNewest)
        let inside = Atomic<Bool>(false)
        let overlaps = Atomic<Int>(0)
        let received = Lock<[Int]>([])
        let consumer = Task {
            try await buffer.forEach { value in
                if inside.exchange(true, ordering: .acquiring) { overlaps.add(1, ordering: .relaxed) }
                received.withLock { $0.append(value) }
                inside.store(false, ordering: .releasing)
            }
        }
        try await waitUntil { buffer.isHandlerInstalled }
        let perProducer = 20_000
        await withTaskGroup(of: Void.self) { group in
            for producer in 0..<2 {
                group.addTask {
                    await withCheckedContinuation { done in
                        Thread.detachNewThread {
                            for index in 0..<perProducer { buffer.yield(producer * perProducer + index) }
                            done.resume()
                        }
                    }
                }
            }
        }
        buffer.finish()
        try await consumer.value
        let all = received.withLock { $0 }
        #expect(overlaps.load(ordering: .relaxed) == 0)
        #expect(all.count == 2 * perProducer)
        #expect(all.filter { $0 < perProducer } == Array(0..<perProducer))
        #expect(all.filter { $0 >= perProducer } == Array(perProducer..<(2 * perProducer)))
    }

    @Test func cancellingTheHandlersTaskEndsTheStreamAndRunsTheTerminationHandler() async throws {
        let buffer = DeliveryBuffer<Int>(limit: 100, policy: .dropNewest)
        let terminated = Atomic<Int>(0)
        buffer.onTermination { terminated.add(1, ordering: .relaxed) }
        let consumer = Task { try await buffer.forEach { _ in } }
        try await waitUntil { buffer.isHandlerInstalled }
        consumer.cancel()
        try await consumer.value
        #expect(terminated.load(ordering: .relaxed) == 1)
        #expect(buffer.yield(1) == .terminated)
    }
}
