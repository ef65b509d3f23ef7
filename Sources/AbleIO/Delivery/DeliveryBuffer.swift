/// The bounded buffer behind a hot stream: producers yield into it from wherever values arrive,
/// without a task or a hop and without ever waiting, and one consumer takes them in a
/// `for try await` loop.
///
/// The decisions are a ``DeliveryBufferStateMachine``'s; this is its storage: the machine behind
/// a mutex, and the consumers' continuations and the termination handler, which it resumes and
/// runs outside the lock. A yield takes the lock once, and so does a `next()` that finds a value.
///
/// **Buffering:** at most `limit` values wait for the consumer. When the buffer is full, the
/// policy decides: ``Policy/dropNewest`` refuses the new value, ``Policy/dropOldest`` pushes out
/// the oldest; either way the drop is counted in ``droppedCount`` and nothing is reordered.
/// Values yielded during a ``DeliveryBatch`` wake a waiting consumer once, when the batch ends,
/// instead of once per value: a wake-up costs a thread switch, so a burst costs one. Elsewhere
/// a yield wakes the consumer at once.
///
/// **End:** the stream ends when the producer finishes it (``finish(throwing:)``), when whoever
/// holds its lifetime lets it go (``IterationLifetime``), or when the consumer's task is
/// cancelled. However it ends, values already buffered are still delivered, then the error the
/// producer finished with (thrown once, if there is one), then `nil` on every later call; later
/// yields are refused (``YieldResult/terminated``), and the handler given to
/// ``onTermination(_:)`` runs once.
///
/// **Cancellation:** cancelling the task that iterates ends the stream, as if the producer had
/// finished it without an error: `next()` returns `nil` once the values already buffered are
/// taken (at once when it was waiting, since it waits only on an empty buffer), every later
/// call returns `nil`, and the termination handler runs, so that whoever feeds the stream stops
/// the work behind it. It makes no difference whether the task is cancelled while it waits or
/// before it asks. An error the producer ended the stream with before the cancellation is still
/// thrown. This is the rule of `AsyncStream` too, and every stream built on this buffer states
/// it in its own documentation with the sentence "Cancelling the task that iterates ends the
/// stream: `next()` returns `nil` once the values already buffered are taken, and the work
/// behind the stream stops."
package final class DeliveryBuffer<Element: Sendable>: Sendable {
    package typealias Machine = DeliveryBufferStateMachine<Element, UnsafeContinuation<Void, Never>>
    /// What a full buffer does with a new value.
    package typealias Policy = Machine.Policy
    /// What became of a yielded value.
    package typealias YieldResult = Machine.YieldResult

    private let state: Lock<Machine>

    /// A buffer of at most `limit` values (at least one) with the given policy when full.
    package init(limit: Int, policy: Policy) {
        state = Lock(Machine(limit: limit, policy: policy))
    }

    // MARK: Producing

    /// Adds a value; wakes a waiting consumer at once, or when the current batch ends.
    @discardableResult
    package func yield(_ element: Element) -> YieldResult {
        // The batch is looked up only when a consumer waits: that is when it matters.
        let (result, wake) = state.withLock { $0.yield(element, inBatch: DeliveryBatch.current != nil) }
        // Consumed: the handler is moved out of `wake`, not copied (one retain and release less).
        switch consume wake {
        case nil: break
        case .now(let waiter): waiter.resume()
        case .atEndOfBatch: DeliveryBatch.current?.defer(self)
        case .deliver(let handler): deliver(element, to: handler)
        }
        return result
    }

    /// Calls `handler` with `element`, then with the values other producers yielded meanwhile.
    private func deliver(_ element: Element, to handler: Machine.Handler) {
        handler(element)
        while true {
            switch state.withLock({ $0.nextToDeliver() }) {
            case .element(let next): handler(next)
            case .done: return
            case .ended(let waiter):
                waiter?.resume()
                return
            }
        }
    }

    /// Ends the stream: values already buffered are still delivered, then `error` (if any) is
    /// thrown to the consumer, once. Later calls and yields do nothing.
    package func finish(throwing error: (any Error)? = nil) {
        run(state.withLock { $0.finish(throwing: error) })
    }

    /// Runs `handler` once when the stream ends, however it ends (at once if it has ended): the
    /// place to stop the work that feeds the stream.
    package func onTermination(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.setOnTermination(handler) }?()
    }

    private func run(_ action: Machine.FinishAction) {
        guard case .end(let waiters, let onTermination) = action else { return }
        for waiter in waiters { waiter.resume() }
        onTermination?()
    }

    // MARK: Observing

    /// How many values were dropped by the full buffer.
    package var droppedCount: Int { state.withLock { $0.droppedCount } }

    /// How many values wait for the consumer.
    package var bufferedCount: Int { state.withLock { $0.bufferedCount } }

    /// Whether a consumer was woken for a value and has not come for it yet, or took one with
    /// ``nextHeld(isolation:)`` and still holds it: a driver of virtual time lets the consumer deal
    /// with it before it moves time on.
    package var hasPendingHandOff: Bool { state.withLock { $0.hasPendingHandOff } }

    /// Whether a consumer installed a handler with ``forEach(isolation:_:)`` and the stream has not
    /// ended since.
    package var isHandlerInstalled: Bool { state.withLock { $0.isHandlerInstalled } }

    /// Whether the consumer is suspended, waiting for a value.
    package var isConsumerWaiting: Bool { state.withLock { $0.isConsumerWaiting } }

    // MARK: Consuming

    /// The next value, waiting for one.
    ///
    /// - Returns: The value, or `nil` once the stream has ended (also by the cancellation of the
    ///   calling task) and every buffered value was taken.
    /// - Throws: The error the producer finished the stream with, once.
    package func next(isolation actor: isolated (any Actor)? = #isolation) async throws -> Element? {
        try await next(holding: false, isolation: actor)
    }

    /// Like ``next(isolation:)``, but the value counts as handed over (``hasPendingHandOff``) until
    /// ``releaseHeld()``: for a consumer that takes a value before it knows it will keep it.
    package func nextHeld(isolation actor: isolated (any Actor)? = #isolation) async throws -> Element? {
        try await next(holding: true, isolation: actor)
    }

    /// The next value if one waits in the buffer now; `nil` at once when none does.
    package func nextIfBuffered() -> Element? {
        state.withLock { $0.nextIfBuffered() }
    }

    /// Lets go of a value taken with ``nextHeld(isolation:)``.
    package func releaseHeld() {
        state.withLock { machine -> (@Sendable () -> Void)? in
            machine.releaseHeld()
            return machine.hasPendingHandOff ? nil : machine.handOffObserver
        }?()
    }

    /// Calls `observer` whenever a hand-off that ``hasPendingHandOff`` reported ends: a driver of
    /// virtual time that waits for it looks again then, instead of asking over and over.
    package func setHandOffObserver(_ observer: @escaping @Sendable () -> Void) {
        state.withLock { $0.handOffObserver = observer }
    }

    @inline(__always)
    private func next(holding: Bool, isolation actor: isolated (any Actor)?) async throws -> Element? {
        // A consumer cancelled before it asks ends the stream too, not only one cancelled while it
        // waits: a producer faster than the consumer would otherwise keep it busy forever.
        if Task.isCancelled { cancel() }
        while true {
            let (action, handedOver) = state.withLock { machine -> (Machine.NextAction, (@Sendable () -> Void)?) in
                let wasPending = machine.hasPendingHandOff
                let action = machine.next(holding: holding)
                return (action, wasPending && !machine.hasPendingHandOff ? machine.handOffObserver : nil)
            }
            handedOver?()
            switch action {
            case .element(let element):
                return element
            case .end(nil):
                return nil
            case .end(let error?):
                throw error
            case .wait:
                await withTaskCancellationHandler {
                    await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Void, Never>) in
                        if case .resumeNow = state.withLock({ $0.wait(continuation) }) { continuation.resume() }
                    }
                } onCancel: {
                    cancel()
                }
            }
        }
    }

    /// Calls `body` with every value, in order and one call at a time, until the stream ends:
    /// first, on the calling thread, the values buffered before; then each value on the thread
    /// that yields it, from inside ``yield(_:)``, without buffering it (a value yielded while
    /// another thread is in `body` waits in the buffer, and that thread delivers it next).
    ///
    /// Returns when the stream has ended (also by the cancellation of the calling task) and no
    /// call of `body` is under way; throws the error the producer finished it with. A buffer
    /// takes either this consumer or iterators, not both.
    package func forEach(
        isolation actor: isolated (any Actor)? = #isolation, _ body: @escaping @Sendable (Element) -> Void
    ) async throws {
        if Task.isCancelled { cancel() }
        install: while true {
            switch state.withLock({ $0.installHandler(body) }) {
            case .element(let element): body(element)
            case .installed: break install
            case .end(nil): return
            case .end(let error?): throw error
            }
        }
        await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Void, Never>) in
                if case .resumeNow = state.withLock({ $0.waitForEnd(continuation) }) { continuation.resume() }
            }
        } onCancel: {
            cancel()
        }
        if let error = state.withLock({ $0.takeEndError() }) { throw error }
    }

    private func cancel() {
        run(state.withLock { $0.cancel() })
    }
}

extension DeliveryBuffer: DeferredWake {
    func endBatch() {
        state.withLock { $0.endBatch() }?.resume()
    }
}

// Generic code called from another module runs unspecialized (a metadata lookup and value
// witness calls for every value); these entry points are compiled here for byte arrays, the
// elements of the busiest streams. `@inlinable` would not help: Swift 6.3 serializes no body of a
// `package` declaration for other modules (that takes its experimental package CMO, which needs
// unsafe flags and library evolution), so only `public` code is specialized in its callers.
extension DeliveryBuffer where Element == [UInt8] {
    /// ``yield(_:)`` for byte arrays.
    @discardableResult
    package func yieldBytes(_ bytes: [UInt8]) -> YieldResult {
        yield(bytes)
    }

    /// ``next(isolation:)`` for byte arrays.
    package func nextBytes(isolation actor: isolated (any Actor)? = #isolation) async throws -> [UInt8]? {
        try await next(holding: false, isolation: actor)
    }
}
