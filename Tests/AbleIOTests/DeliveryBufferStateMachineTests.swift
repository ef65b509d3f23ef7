import AbleIO
import Synchronization
import Testing

/// The decisions of ``DeliveryBufferStateMachine``, driven synchronously: waiters are strings.
struct DeliveryBufferStateMachineTests {
    typealias Machine = DeliveryBufferStateMachine<Int, String>

    struct Gone: Error {}

    /// Takes every buffered value, and what comes after them.
    func drain(_ machine: inout Machine) -> (values: [Int], end: Machine.NextAction) {
        var values: [Int] = []
        while true {
            let action = machine.next()
            guard case .element(let value) = action else { return (values, action) }
            values.append(value)
        }
    }

    func isNormalEnd(_ action: Machine.NextAction) -> Bool {
        if case .end(nil) = action { true } else { false }
    }

    func isWait(_ action: Machine.NextAction) -> Bool {
        if case .wait = action { true } else { false }
    }

    // MARK: Buffering

    @Test("Values are buffered up to the limit and come out in order", arguments: [1, 3, 100])
    func buffersUpToTheLimit(limit: Int) {
        var machine = Machine(limit: limit, policy: .dropNewest)
        for value in 0..<limit {
            let (result, wake) = machine.yield(value, inBatch: false)
            #expect(result == .enqueued)
            #expect(wake == nil)
        }
        #expect(machine.bufferedCount == limit)
        let (values, next) = drain(&machine)
        #expect(values == Array(0..<limit))
        #expect(isWait(next))
        #expect(machine.droppedCount == 0)
    }

    @Test("A limit below one holds one value")
    func theLimitIsAtLeastOne() {
        var machine = Machine(limit: 0, policy: .dropNewest)
        #expect(machine.limit == 1)
        #expect(machine.yield(1, inBatch: false).0 == .enqueued)
        #expect(machine.yield(2, inBatch: false).0 == .dropped)
    }

    @Test(
        "A full buffer drops the newest or the oldest value, counts each drop and keeps the order",
        arguments: [
            (Machine.Policy.dropNewest, [0, 1, 2]),
            (Machine.Policy.dropOldest, [3, 4, 5]),
        ]
    )
    func fullBuffer(policy: Machine.Policy, kept: [Int]) {
        var machine = Machine(limit: 3, policy: policy)
        let results = (0..<6).map { machine.yield($0, inBatch: false).0 }
        #expect(results == [.enqueued, .enqueued, .enqueued, .dropped, .dropped, .dropped])
        #expect(machine.droppedCount == 3)
        #expect(machine.bufferedCount == 3)
        #expect(drain(&machine).values == kept)
    }

    @Test("Taking values makes room again")
    func takingMakesRoom() {
        var machine = Machine(limit: 2, policy: .dropNewest)
        _ = machine.yield(0, inBatch: false)
        _ = machine.yield(1, inBatch: false)
        _ = machine.next()
        #expect(machine.yield(2, inBatch: false).0 == .enqueued)
        #expect(drain(&machine).values == [1, 2])
        #expect(machine.droppedCount == 0)
    }

    @Test("Order survives many rounds of partial draining")
    func orderAcrossCompaction() {
        var machine = Machine(limit: 1000, policy: .dropOldest)
        var expected: [Int] = []
        var received: [Int] = []
        var next = 0
        for round in 0..<50 {
            for _ in 0..<(round % 7 + 3) {
                _ = machine.yield(next, inBatch: false)
                expected.append(next)
                next += 1
            }
            for _ in 0..<(round % 5 + 1) {
                if case .element(let value) = machine.next() { received.append(value) }
            }
        }
        received += drain(&machine).values
        #expect(received == expected)
    }

    // MARK: Ending

    @Test("Finishing without an error delivers the buffered values, then nil on every call")
    func finishNormally() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.yield(1, inBatch: false)
        _ = machine.yield(2, inBatch: false)
        guard case .end(let waiters, nil) = machine.finish(throwing: nil) else {
            Issue.record("the first finish did nothing")
            return
        }
        #expect(waiters.isEmpty)
        #expect(machine.isEnded)
        #expect(machine.yield(3, inBatch: false).0 == .terminated)
        let (values, end) = drain(&machine)
        #expect(values == [1, 2])
        #expect(isNormalEnd(end))
        #expect(isNormalEnd(machine.next()))
    }

    @Test("Finishing with an error delivers the buffered values, then the error once, then nil")
    func finishWithAnError() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.yield(1, inBatch: false)
        _ = machine.finish(throwing: Gone())
        #expect(machine.next(holding: false).element == 1)
        guard case .end(let error?) = machine.next() else {
            Issue.record("the error was not delivered")
            return
        }
        #expect(error is Gone)
        #expect(isNormalEnd(machine.next()))
    }

    @Test("Only the first finish counts")
    func finishOnce() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.finish(throwing: nil)
        guard case .none = machine.finish(throwing: Gone()) else {
            Issue.record("a second finish ended the buffer again")
            return
        }
        #expect(isNormalEnd(machine.next()))
    }

    @Test("The termination handler is handed out once, by whichever end comes first")
    func terminationHandlerOnce() {
        let runs = Atomic(0)
        var machine = Machine(limit: 10, policy: .dropNewest)
        #expect(machine.setOnTermination { runs.add(1, ordering: .relaxed) } == nil)
        guard case .end(_, let handler?) = machine.cancel() else {
            Issue.record("the handler was not handed out")
            return
        }
        handler()
        guard case .none = machine.finish(throwing: nil) else {
            Issue.record("the buffer ended twice")
            return
        }
        #expect(runs.load(ordering: .relaxed) == 1)
    }

    @Test("A termination handler set after the end is handed back to run at once")
    func terminationHandlerAfterTheEnd() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.finish(throwing: nil)
        #expect(machine.setOnTermination {} != nil)
    }

    // MARK: Waiting and waking

    @Test("A consumer that finds nothing waits, and a yield outside a batch hands its waiter back at once")
    func waitAndWake() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        #expect(isWait(machine.next()))
        #expect(machine.wait("consumer") == .suspended)
        #expect(machine.isConsumerWaiting)
        let (result, wake) = machine.yield(7, inBatch: false)
        #expect(result == .enqueued)
        #expect(wake == .now("consumer"))
        #expect(!machine.isConsumerWaiting)
        // Nobody waits any more: the next yield wakes nobody.
        #expect(machine.yield(8, inBatch: false).1 == nil)
        #expect(drain(&machine).values == [7, 8])
    }

    @Test("A consumer about to wait is resumed at once when a value or the end came meanwhile")
    func waitAfterARace() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        #expect(isWait(machine.next()))
        _ = machine.yield(1, inBatch: false)
        #expect(machine.wait("late") == .resumeNow)
        #expect(!machine.isConsumerWaiting)
        _ = machine.next()
        #expect(isWait(machine.next()))
        _ = machine.finish(throwing: nil)
        #expect(machine.wait("late") == .resumeNow)
    }

    @Test("A yield into a full buffer that drops the new value wakes nobody")
    func droppedValueWakesNobody() {
        var machine = Machine(limit: 1, policy: .dropNewest)
        _ = machine.yield(1, inBatch: true)
        _ = machine.next()
        #expect(machine.wait("consumer") == .suspended)
        // The consumer waits on an empty buffer; in a batch the buffer fills, then drops.
        #expect(machine.yield(2, inBatch: true) == (.enqueued, .atEndOfBatch))
        #expect(machine.yield(3, inBatch: true) == (.dropped, nil))
        #expect(machine.endBatch() == "consumer")
    }

    @Test("In a batch, a waiting consumer is woken once, when the batch ends")
    func batchDefersTheWake() {
        var machine = Machine(limit: 100, policy: .dropNewest)
        _ = machine.next()
        #expect(machine.wait("consumer") == .suspended)
        #expect(machine.yield(0, inBatch: true).1 == .atEndOfBatch)
        for value in 1..<30 {
            #expect(machine.yield(value, inBatch: true).1 == nil)
        }
        #expect(machine.isConsumerWaiting)
        #expect(machine.bufferedCount == 30)
        #expect(machine.endBatch() == "consumer")
        #expect(machine.endBatch() == nil)
        #expect(drain(&machine).values == Array(0..<30))
    }

    @Test("A wake held back by a batch is not repeated when something else woke the consumer first")
    func batchWakeTakenMeanwhile() {
        var machine = Machine(limit: 100, policy: .dropNewest)
        _ = machine.next()
        _ = machine.wait("consumer")
        #expect(machine.yield(1, inBatch: true).1 == .atEndOfBatch)
        // Another producer, outside the batch, wakes the consumer at once.
        #expect(machine.yield(2, inBatch: false).1 == .now("consumer"))
        #expect(machine.endBatch() == nil)
    }

    @Test("Ending the buffer during a batch resumes the waiter at once, and the batch's end then does nothing")
    func finishDuringABatch() {
        var machine = Machine(limit: 100, policy: .dropNewest)
        _ = machine.next()
        _ = machine.wait("consumer")
        _ = machine.yield(1, inBatch: true)
        guard case .end(let waiters, _) = machine.finish(throwing: nil) else {
            Issue.record("the finish did nothing")
            return
        }
        #expect(waiters == ["consumer"])
        #expect(machine.endBatch() == nil)
        #expect(drain(&machine).values == [1])
    }

    @Test("Consumers sharing a buffer: a value wakes one of them, the end wakes all")
    func severalWaiters() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        for name in ["a", "b", "c"] {
            _ = machine.next()
            #expect(machine.wait(name) == .suspended)
        }
        #expect(machine.yield(1, inBatch: false).1 == .now("a"))
        #expect(machine.yield(2, inBatch: false).1 == .now("b"))
        _ = drain(&machine)
        _ = machine.next()
        #expect(machine.wait("a") == .suspended)
        guard case .end(let waiters, _) = machine.finish(throwing: nil) else {
            Issue.record("the finish did nothing")
            return
        }
        #expect(waiters == ["c", "a"])
        #expect(!machine.isConsumerWaiting)
    }

    // MARK: Cancellation

    @Test("Cancelling the consumer ends the buffer: its waiter is resumed and later calls get nil")
    func cancelWhileWaiting() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.next()
        _ = machine.wait("consumer")
        guard case .end(let waiters, _) = machine.cancel() else {
            Issue.record("the cancellation did nothing")
            return
        }
        #expect(waiters == ["consumer"])
        #expect(isNormalEnd(machine.next()))
        #expect(isNormalEnd(machine.next()))
        #expect(machine.yield(1, inBatch: false).0 == .terminated)
    }

    @Test("A cancelled consumer still gets the values buffered before, then nil")
    func cancelWithBufferedValues() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.yield(1, inBatch: false)
        _ = machine.yield(2, inBatch: false)
        _ = machine.cancel()
        let (values, end) = drain(&machine)
        #expect(values == [1, 2])
        #expect(isNormalEnd(end))
    }

    @Test("Cancelling after the producer failed still delivers the error")
    func cancelAfterAFailure() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.finish(throwing: Gone())
        guard case .none = machine.cancel(), case .end(let error?) = machine.next() else {
            Issue.record("the cancellation replaced the error")
            return
        }
        #expect(error is Gone)
    }

    // MARK: Holding

    @Test("A held value is a pending hand-off until it is released; a buffered one nobody waits for is not")
    func holding() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        #expect(!machine.hasPendingHandOff)
        _ = machine.yield(1, inBatch: false)
        _ = machine.yield(2, inBatch: false)
        #expect(!machine.hasPendingHandOff)
        #expect(machine.next().element == 1)
        #expect(machine.next(holding: true).element == 2)
        #expect(machine.bufferedCount == 0)
        #expect(machine.heldCount == 1)
        #expect(machine.hasPendingHandOff)
        machine.releaseHeld()
        #expect(machine.heldCount == 0)
        #expect(!machine.hasPendingHandOff)
    }

    @Test("Waking a consumer for a value is a pending hand-off until the consumer asks again")
    func handingOver() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        #expect(isWait(machine.next()))
        #expect(machine.wait("consumer") == .suspended)
        #expect(!machine.hasPendingHandOff)
        _ = machine.yield(1, inBatch: false)
        #expect(machine.hasPendingHandOff)
        #expect(machine.next().element == 1)
        #expect(!machine.hasPendingHandOff)
        // A batch hands over when it ends, not before.
        #expect(isWait(machine.next()))
        #expect(machine.wait("consumer") == .suspended)
        _ = machine.yield(2, inBatch: true)
        #expect(!machine.hasPendingHandOff)
        #expect(machine.endBatch() == "consumer")
        #expect(machine.hasPendingHandOff)
    }
}

// MARK: - A handler instead of iteration

extension DeliveryBufferStateMachineTests {
    @Test("Installing a handler hands out the values buffered before, then installs it")
    func installingTakesTheBufferedValuesFirst() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.yield(1, inBatch: false)
        _ = machine.yield(2, inBatch: false)
        var taken: [Int] = []
        while case .element(let value) = machine.installHandler({ _ in }) { taken.append(value) }
        #expect(taken == [1, 2])
        // From now on a yield hands its value to the handler instead of the buffer, batch or not.
        let (result, wake) = machine.yield(3, inBatch: true)
        #expect(result == .enqueued)
        #expect(wake == .deliver({ _ in }))
        #expect(machine.bufferedCount == 0)
    }

    @Test("A value yielded while a producer is in the handler waits, and that producer delivers it")
    func aYieldDuringADeliveryWaits() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        guard case .installed = machine.installHandler({ _ in }) else {
            Issue.record("an empty buffer did not install the handler")
            return
        }
        #expect(machine.yield(1, inBatch: false).1 == .deliver({ _ in }))
        // Another thread yields while the first is in the handler.
        #expect(machine.yield(2, inBatch: false) == (.enqueued, nil))
        #expect(machine.yield(3, inBatch: false) == (.enqueued, nil))
        guard case .element(2) = machine.nextToDeliver(), case .element(3) = machine.nextToDeliver(),
            case .done = machine.nextToDeliver()
        else {
            Issue.record("the waiting values were not delivered in order")
            return
        }
        // Idle again: the next yield delivers itself.
        #expect(machine.yield(4, inBatch: false).1 == .deliver({ _ in }))
    }

    @Test("While a producer is in the handler, the end waits for it to leave; the error is taken once")
    func theEndWaitsForTheDelivery() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.installHandler { _ in }
        #expect(machine.waitForEnd("consumer") == .suspended)
        _ = machine.yield(1, inBatch: false)
        _ = machine.yield(2, inBatch: false)
        guard case .end(let resumed, _) = machine.finish(throwing: Gone()) else {
            Issue.record("the finish did nothing")
            return
        }
        #expect(resumed.isEmpty)
        #expect(machine.yield(3, inBatch: false) == (.terminated, nil))
        guard case .element(2) = machine.nextToDeliver(), case .ended("consumer") = machine.nextToDeliver() else {
            Issue.record("the delivery did not end by resuming the consumer")
            return
        }
        #expect(machine.takeEndError() is Gone)
        #expect(machine.takeEndError() == nil)
    }

    @Test("With no producer in the handler, the end resumes the consumer at once, or finds it later")
    func theEndWithNoDelivery() {
        var machine = Machine(limit: 10, policy: .dropNewest)
        _ = machine.installHandler { _ in }
        #expect(machine.waitForEnd("consumer") == .suspended)
        guard case .end(let resumed, _) = machine.cancel() else {
            Issue.record("the cancellation did nothing")
            return
        }
        #expect(resumed == ["consumer"])

        var ended = Machine(limit: 10, policy: .dropNewest)
        _ = ended.installHandler { _ in }
        _ = ended.finish(throwing: nil)
        #expect(ended.waitForEnd("late") == .resumeNow)
        #expect(ended.takeEndError() == nil)
        guard case .end(nil) = ended.installHandler({ _ in }) else {
            Issue.record("installing on an ended, empty buffer did not report the end")
            return
        }
    }
}

extension DeliveryBufferStateMachine.NextAction {
    /// The value, if the action hands one out.
    fileprivate var element: Element? {
        if case .element(let element) = self { element } else { nil }
    }
}
