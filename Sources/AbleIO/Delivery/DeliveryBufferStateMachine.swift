/// The decisions of a bounded buffer between producers that never wait and a consumer that
/// iterates an `AsyncSequence`: what a yield does with its value, whom it wakes and when, what the
/// consumer gets next, and how the buffer ends.
///
/// The machine only decides. It holds no lock and resumes nothing: each mutating method returns
/// what its caller is to do (resume a waiter, run the termination handler), and the caller does it
/// after leaving the lock the machine is kept behind (``DeliveryBuffer``). `Waiter` is what a
/// suspended consumer waits with: a continuation, or a plain value in tests.
///
/// When the buffer holds `limit` values, ``Policy`` decides what a new one does; either way the
/// drop is counted and nothing is reordered. Values yielded during a batch (see ``yield(_:inBatch:)``)
/// wake a waiting consumer once, when the batch ends, rather than once each.
///
/// A consumer may instead install a handler (``installHandler(_:)``): each yield then hands its
/// value to the handler on the producer's thread, one call at a time and in order. A value
/// yielded while another thread is in the handler waits in the buffer, and that thread delivers
/// it before it leaves (``nextToDeliver()``).
package struct DeliveryBufferStateMachine<Element, Waiter> {
    /// What a full buffer does with a new value.
    package enum Policy: Sendable {
        /// Keep the buffered values and refuse the new one.
        case dropNewest
        /// Push out the oldest buffered value to make room.
        case dropOldest
    }

    /// What became of a yielded value.
    package enum YieldResult: Sendable, Equatable {
        case enqueued
        /// Dropped by a full buffer (the new value or, with ``Policy/dropOldest``, the oldest).
        case dropped
        /// The buffer had ended; the value was discarded.
        case terminated
    }

    /// Runs once when the buffer ends, however it ends.
    package typealias TerminationHandler = @Sendable () -> Void

    private enum End {
        /// Ended normally, or ended with an error that was already delivered.
        case finished
        /// Ended with an error that the consumer has not seen yet.
        case failed(any Error)
    }

    /// Buffered values from `head` on; the slots before `head` were taken and are reclaimed when
    /// the array is compacted.
    private var elements: [Element] = []
    private var head = 0
    /// The consumer that waits. Most buffers have one consumer; further ones, of a buffer that
    /// several iterators share, wait in `otherWaiters`.
    private var waiter: Waiter?
    private var otherWaiters: [Waiter] = []
    /// Whether the waiter is to be woken when the current batch ends.
    private var isWakeDeferred = false
    /// Whether a consumer was woken for a value and has not asked for one since.
    private var isHandingOver = false
    private var end: End?
    private var onTermination: TerminationHandler?

    /// What the consumer that installed a handler is called with.
    package typealias Handler = @Sendable (Element) -> Void

    /// The consumer's handler, once it installed one.
    private var handler: Handler?
    /// Whether a producer's thread is in the handler.
    private var isDelivering = false
    /// The consumer that installed the handler, waiting for the end.
    private var endWaiter: Waiter?

    /// The most values the buffer holds.
    package let limit: Int
    /// What a full buffer does with a new value.
    package let policy: Policy

    /// How many values a full buffer dropped.
    package private(set) var droppedCount = 0

    /// How many values were taken with `holding` and not yet released (``releaseHeld()``).
    package private(set) var heldCount = 0

    /// An empty, open buffer of at most `limit` values (at least one).
    package init(limit: Int, policy: Policy) {
        self.limit = max(limit, 1)
        self.policy = policy
    }

    /// How many values wait for the consumer.
    package var bufferedCount: Int { elements.count - head }

    /// Whether a value is on its way to a consumer that needs nothing else to take it: a consumer
    /// was woken for it and has not asked again yet, or took it with `holding` and has not released
    /// it. Values that wait for a consumer that is not waiting do not count: nothing says it will
    /// come for them.
    package var hasPendingHandOff: Bool { isHandingOver || heldCount > 0 }

    /// Told when a pending hand-off ends (see ``DeliveryBuffer/setHandOffObserver(_:)``).
    package var handOffObserver: (@Sendable () -> Void)?

    /// Whether a consumer is suspended, waiting for a value.
    package var isConsumerWaiting: Bool { waiter != nil }

    /// Whether a consumer installed a handler (``installHandler(_:)``) and the buffer has not
    /// ended since.
    package var isHandlerInstalled: Bool { handler != nil }

    /// Whether the buffer has ended (its values may still wait for the consumer).
    package var isEnded: Bool { end != nil }

    // MARK: Producing

    /// Whom a yield wakes.
    package enum Wake {
        /// Resume this waiter now.
        case now(Waiter)
        /// Call ``endBatch()`` when the current batch ends, and resume the waiter it returns.
        case atEndOfBatch
        /// Call the handler with the value (which the buffer did not keep), then with each value
        /// ``nextToDeliver()`` returns until it returns none.
        case deliver(Handler)
    }

    /// A producer adds a value.
    ///
    /// - Parameters:
    ///   - element: The value.
    ///   - inBatch: Whether the producer runs a batch: a waiting consumer is then woken once, when
    ///     the batch ends, for everything the batch yielded. Asked only when a consumer waits,
    ///     since finding out costs a thread-specific lookup.
    /// - Returns: What became of the value, and whom to wake (`nil`: nobody).
    @inline(__always)
    package mutating func yield(_ element: Element, inBatch: @autoclosure () -> Bool) -> (YieldResult, Wake?) {
        guard end == nil else { return (.terminated, nil) }
        if let handler, !isDelivering {
            isDelivering = true
            return (.enqueued, .deliver(handler))
        }
        var result = YieldResult.enqueued
        if bufferedCount >= limit {
            droppedCount += 1
            result = .dropped
            switch policy {
            case .dropNewest: return (.dropped, nil)
            case .dropOldest: _ = removeFirst()
            }
        }
        elements.append(element)
        guard waiter != nil, handler == nil else { return (result, nil) }
        guard !inBatch() else {
            guard !isWakeDeferred else { return (result, nil) }
            isWakeDeferred = true
            return (result, .atEndOfBatch)
        }
        return (result, takeWaiter().map(Wake.now))
    }

    /// The batch that held back a wake-up ended.
    ///
    /// - Returns: The waiter to resume, unless something woke it meanwhile.
    package mutating func endBatch() -> Waiter? {
        guard isWakeDeferred else { return nil }
        return takeWaiter()
    }

    /// What a producer that delivered a value to the handler does next.
    package enum DeliveryAction {
        /// Call the handler with this value too.
        case element(Element)
        /// Nothing: the producer leaves the handler to the next yield.
        case done
        /// The buffer ended meanwhile: resume this waiter (the consumer waiting for the end).
        case ended(Waiter?)
    }

    /// A producer returned from the handler: the value that waited meanwhile, if one did.
    package mutating func nextToDeliver() -> DeliveryAction {
        if bufferedCount > 0 { return .element(removeFirst()) }
        isDelivering = false
        guard end != nil else { return .done }
        defer { endWaiter = nil }
        return .ended(endWaiter)
    }

    /// What installing a handler asks of the consumer.
    package enum InstallAction {
        /// A value that was buffered before: call the handler with it on this thread, and install
        /// again.
        case element(Element)
        /// Installed: from now on yields call the handler.
        case installed
        /// The buffer ended and is empty: return, or throw the error.
        case end((any Error)?)
    }

    /// The consumer installs `handler`, once the values buffered before are taken.
    package mutating func installHandler(_ handler: @escaping Handler) -> InstallAction {
        switch next() {
        case .element(let element): return .element(element)
        case .end(let error): return .end(error)
        case .wait:
            self.handler = handler
            return .installed
        }
    }

    /// The consumer that installed the handler waits for the end with `waiter`.
    package mutating func waitForEnd(_ waiter: Waiter) -> WaitAction {
        guard end == nil || isDelivering else { return .resumeNow }
        endWaiter = waiter
        return .suspended
    }

    /// The error the buffer ended with, if the consumer has not seen it yet (once).
    package mutating func takeEndError() -> (any Error)? {
        guard case .failed(let error) = end else { return nil }
        end = .finished
        return error
    }

    /// What ending the buffer asks of the caller.
    package enum FinishAction {
        /// Nothing: the buffer had ended already.
        case none
        /// Resume these waiters, so that they see the end, then run the termination handler.
        case end(resume: [Waiter], onTermination: TerminationHandler?)
    }

    /// The buffer ends: values already in it are still delivered, then `error` (if any), then
    /// `nil`. Later yields are refused.
    package mutating func finish(throwing error: (any Error)?) -> FinishAction {
        guard end == nil else { return .none }
        end = error.map { .failed($0) } ?? .finished
        isHandingOver = false
        var waiters = otherWaiters
        otherWaiters = []
        if let waiter {
            waiters.insert(waiter, at: 0)
            self.waiter = nil
        }
        // No yield calls the handler any more: let go of what it holds. A producer in it keeps
        // its own reference, and resumes the consumer waiting for the end when it leaves.
        handler = nil
        if let endWaiter, !isDelivering {
            waiters.append(endWaiter)
            self.endWaiter = nil
        }
        isWakeDeferred = false
        defer { onTermination = nil }
        return .end(resume: waiters, onTermination: onTermination)
    }

    /// The consumer's task was cancelled: the buffer ends as ``finish(throwing:)`` without an
    /// error ends it. Values already in it are still delivered, then `nil`; an error the producer
    /// ended the buffer with earlier is still delivered.
    package mutating func cancel() -> FinishAction {
        finish(throwing: nil)
    }

    /// Sets the handler to run when the buffer ends, in place of an earlier one.
    ///
    /// - Returns: The handler, to run now, if the buffer has ended already.
    package mutating func setOnTermination(_ handler: @escaping TerminationHandler) -> TerminationHandler? {
        guard end == nil else { return handler }
        onTermination = handler
        return nil
    }

    // MARK: Consuming

    /// What the consumer is to do next.
    package enum NextAction {
        /// Return this value.
        case element(Element)
        /// The buffer ended and is empty: return `nil`, or throw the error.
        case end((any Error)?)
        /// Nothing yet: suspend, and store the waiter with ``wait(_:)``.
        case wait
    }

    /// The consumer asks for the next value.
    ///
    /// - Parameter holding: Whether the value still counts as handed over but not taken
    ///   (``hasPendingHandOff``) until ``releaseHeld()``: for a consumer that takes a value before it knows it will keep it.
    @inline(__always)
    package mutating func next(holding: Bool = false) -> NextAction {
        isHandingOver = false
        if bufferedCount > 0 {
            if holding { heldCount += 1 }
            return .element(removeFirst())
        }
        switch end {
        case nil:
            return .wait
        case .finished:
            return .end(nil)
        case .failed(let error):
            // The error is thrown once; later calls see a normal end.
            end = .finished
            return .end(error)
        }
    }

    /// The consumer takes the next value if one is buffered, without waiting.
    package mutating func nextIfBuffered() -> Element? {
        bufferedCount > 0 ? removeFirst() : nil
    }

    /// What became of a consumer that was about to suspend.
    package enum WaitAction {
        /// The waiter is stored: a yield, the end of a batch or the end of the buffer resumes it.
        case suspended
        /// A value or the end came meanwhile: resume the waiter now, and ask again.
        case resumeNow
    }

    /// The consumer suspends with `waiter`, after ``next(holding:)`` said ``NextAction/wait``.
    package mutating func wait(_ waiter: Waiter) -> WaitAction {
        guard bufferedCount == 0, end == nil else { return .resumeNow }
        if self.waiter == nil {
            self.waiter = waiter
        } else {
            otherWaiters.append(waiter)
        }
        return .suspended
    }

    /// Lets go of a value taken with `holding`.
    package mutating func releaseHeld() {
        heldCount -= 1
    }

    // MARK: Storage

    /// The waiter to wake for one value; the next consumer in line, if any, waits in its place.
    private mutating func takeWaiter() -> Waiter? {
        let taken = waiter
        waiter = otherWaiters.isEmpty ? nil : otherWaiters.removeFirst()
        isWakeDeferred = false
        if taken != nil { isHandingOver = true }
        return taken
    }

    private mutating func removeFirst() -> Element {
        let element = elements[head]
        head += 1
        if head == elements.count {
            elements.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= elements.count {
            elements.removeFirst(head)
            head = 0
        }
        return element
    }
}

extension DeliveryBufferStateMachine: Sendable where Element: Sendable, Waiter: Sendable {}

extension DeliveryBufferStateMachine.Wake: Equatable where Waiter: Equatable {
    /// Handlers are functions, which cannot be compared: two ``deliver(_:)`` are equal.
    package static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.now(let a), .now(let b)): a == b
        case (.atEndOfBatch, .atEndOfBatch), (.deliver, .deliver): true
        default: false
        }
    }
}
