/// The storage of a stream fed by a socket's read handler: a ``WatermarkBufferStateMachine`` behind a
/// mutex, the consumer's continuation, and the switch that pauses and resumes the producer.
///
/// The producer calls ``produce(_:)`` straight from its read handler: no task and no actor
/// hop per element. The consumer calls ``next(isolation:)``; when it finds the buffer empty it
/// may first fetch an element itself (with `fetch`, a nonblocking `recv(2)` on its own thread)
/// rather than wait for the event loop to run the producer, which saves two thread handoffs
/// per element when the consumer keeps up. Fetches run outside the lock, one at a time.
package final class WatermarkBuffer<Element: Sendable>: Sendable {
    package typealias Machine = WatermarkBufferStateMachine<Element, UnsafeContinuation<Element?, any Error>>

    private struct State: Sendable {
        package var machine: Machine
        /// What to run once the fetch under way ends: closing the socket waits for it.
        package var afterFetch: (@Sendable () -> Void)?
    }

    private let state: Lock<State>
    private let pauseProducer: @Sendable () -> Void
    private let resumeProducer: @Sendable () -> Void
    private let fetch: (@Sendable () -> Element?)?
    private let consumerCancelled: @Sendable () -> Void

    /// Creates an empty buffer.
    ///
    /// - Parameters:
    ///   - watermarks: Pause the producer at `high` buffered elements, resume it at `low`.
    ///   - pauseProducer: Stops the producer (turns its socket's reading off); called with the lock held.
    ///   - resumeProducer: Restarts it; called with the lock held.
    ///   - fetch: Fetches an element for the consumer without waiting, or returns `nil`; from the
    ///     same place as the producer's, and never at the same time (the machine sees to that).
    ///   - consumerCancelled: Runs once, without the lock, when the cancellation of the consumer's
    ///     task ended the buffer: the place to stop the work behind the stream. The producer is
    ///     resumed if it was paused, and what it produces from then on is discarded.
    package init(
        watermarks: Machine.Watermarks,
        pauseProducer: @escaping @Sendable () -> Void,
        resumeProducer: @escaping @Sendable () -> Void,
        fetch: (@Sendable () -> Element?)? = nil,
        consumerCancelled: @escaping @Sendable () -> Void = {}
    ) {
        self.state = Lock(State(machine: Machine(watermarks: watermarks)))
        self.pauseProducer = pauseProducer
        self.resumeProducer = resumeProducer
        self.fetch = fetch
        self.consumerCancelled = consumerCancelled
    }

    /// What ``produce(_:)`` did.
    package enum ProduceOutcome {
        /// `fetch` had nothing.
        case nothing
        /// The element went to the consumer or into the buffer.
        case produced
        /// Stop producing: the buffer is full, or the consumer is fetching; the producer was
        /// paused and will be resumed.
        case paused
    }

    /// Fetches an element, unless the consumer is fetching, and hands it to the consumer or buffers it.
    ///
    /// - Parameter fetch: Returns the element, or `nil` if there is none; called without the lock.
    package func produce(_ fetch: () -> Element?) -> ProduceOutcome {
        // Pausing and resuming happen under the lock: they must reach the socket in the order
        // they were decided, and the flags that say which one is due live here.
        let start = state.withLock { state in
            let action = state.machine.producerStartsFetching()
            if case .stepAside(pauseProducer: true) = action { pauseProducer() }
            return action
        }
        guard case .fetch = start else { return .paused }
        let element = fetch()
        let (action, afterFetch) = state.withLock { state -> (Machine.ProduceAction?, (@Sendable () -> Void)?) in
            let afterFetch = state.afterFetch
            state.afterFetch = nil
            guard let element else {
                if state.machine.fetchEnded() { resumeProducer() }
                return (nil, afterFetch)
            }
            let action = state.machine.produce(element)
            if case .pauseProducer = action { pauseProducer() }
            return (action, afterFetch)
        }
        afterFetch?()
        switch action {
        case nil:
            return .nothing
        case .resume(let continuation, let element):
            continuation.resume(returning: element)
            return .produced
        case .buffered, .discard:
            return .produced
        case .pauseProducer:
            return .paused
        }
    }

    /// Hands an element to the consumer or buffers it.
    ///
    /// - Returns: `true` if the buffer is now full and the producer was paused: stop producing.
    package func produce(_ element: Element) -> Bool {
        produce { element } == .paused
    }

    /// Ends the stream: the consumer gets the elements already buffered, then `nil` or `error`.
    ///
    /// A paused producer is resumed, so that it meets the end and stops for good.
    package func finish(throwing error: (any Error)? = nil) {
        end { $0.finish(error.map { .failed($0) } ?? .finished) }
    }

    /// Ends the stream because the consumer's task was cancelled.
    private func cancel() {
        if end({ $0.cancel() }) { consumerCancelled() }
    }

    /// Ends the machine with `body`, resumes a paused producer under the lock and a waiting
    /// consumer outside it.
    ///
    /// - Returns: Whether this call ended the stream (it had not ended before).
    @discardableResult
    private func end(_ body: (inout Machine) -> Machine.FinishAction) -> Bool {
        let action = state.withLock { state in
            let action = body(&state.machine)
            if case .end(_, _, let resumeCount) = action {
                for _ in 0..<resumeCount { resumeProducer() }
            }
            return action
        }
        guard case .end(let continuation, let error, _) = action else { return false }
        if let error {
            continuation?.resume(throwing: error)
        } else {
            continuation?.resume(returning: nil)
        }
        return true
    }

    /// Runs `body` once no fetch is under way: now, or when the current fetch ends (on the thread
    /// that fetched).
    ///
    /// After ``finish(throwing:)`` no fetch starts, so this is where the socket may be closed.
    package func whenNotFetching(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLock { state in
            guard state.machine.isFetching else { return true }
            state.afterFetch = body
            return false
        }
        if now { body() }
    }

    /// How many elements wait for the consumer.
    package var bufferedCount: Int { state.withLock { $0.machine.bufferedCount } }

    /// Whether the producer is paused now because the buffer is full.
    package var isProducerPaused: Bool { state.withLock { $0.machine.isProducerPaused } }

    /// How many times the producer was paused because the consumer fell behind.
    package var pauseCount: Int { state.withLock { $0.machine.pauseCount } }

    /// How many times the consumer found nothing and waited.
    package var waitCount: Int { state.withLock { $0.machine.waitCount } }

    /// How many times the consumer fetched for itself, and how many times the producer stepped aside.
    package var fetchCounts: (consumer: Int, stepAside: Int) {
        state.withLock { ($0.machine.consumerFetchCount, $0.machine.stepAsideCount) }
    }

    /// The next element, waiting for one if none is buffered.
    ///
    /// Cancelling the calling task, while it waits or before it asks, ends the stream as
    /// ``finish(throwing:)`` without an error does: this call and every later one return the
    /// elements already buffered, then `nil`; `consumerCancelled` runs.
    ///
    /// - Returns: The element, or `nil` once the stream has ended and every element was taken.
    /// - Throws: The error the stream ended with (once), or ``SocketError/Code/inProgress`` if
    ///   another task is already waiting.
    package func next(isolation actor: isolated (any Actor)? = #isolation) async throws -> Element? {
        // A consumer cancelled before it asks ends the stream too, not only one cancelled while it
        // waits: a producer faster than the consumer would otherwise keep it busy forever.
        if Task.isCancelled { cancel() }
        switch takeNext() {
        case .element(let element, _): return element
        case .end(let error?): throw error
        case .end(nil): return nil
        case .fetch: break
        case .wait: return try await wait(isolation: actor)
        }
        // Nothing buffered and no one fetching: fetch for ourselves.
        let element = fetch?()
        let afterFetch = state.withLock { state in
            if state.machine.consumerFetched() { resumeProducer() }
            let afterFetch = state.afterFetch
            state.afterFetch = nil
            return afterFetch
        }
        afterFetch?()
        if let element { return element }
        return try await wait(isolation: actor)
    }

    private func takeNext() -> Machine.NextAction {
        state.withLock { state in
            let action = state.machine.next(mayFetch: fetch != nil)
            if case .element(_, resumeProducer: true) = action { resumeProducer() }
            return action
        }
    }

    private func wait(isolation actor: isolated (any Actor)?) async throws -> Element? {
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation(isolation: actor) { continuation in
                // A cancellation that came before the waiter was stored ended the buffer already:
                // the machine answers with the end.
                let action = state.withLock { state in
                    let action = state.machine.wait(continuation)
                    if case .element(_, resumeProducer: true) = action { resumeProducer() }
                    return action
                }
                switch action {
                case .suspended: break
                case .element(let element, _): continuation.resume(returning: element)
                case .end(let error?): continuation.resume(throwing: error)
                case .end(nil): continuation.resume(returning: nil)
                case .busy:
                    continuation.resume(
                        throwing: SocketError(
                            .busy, message: "another task is already waiting for the next element"))
                }
            }
        } onCancel: {
            cancel()
        }
    }
}

/// When a producer stops and restarts filling a ``WatermarkBuffer``: it pauses when `high`
/// elements wait for the consumer and resumes when the consumer has taken them down to `low`.
package struct BufferWatermarks: Hashable, Sendable {
    /// How many waiting elements pause the producer; at least 1.
    package var high: Int
    /// How many waiting elements resume it; less than ``high``.
    package var low: Int

    /// Creates watermarks.
    ///
    /// - Parameters:
    ///   - high: How many waiting elements pause the producer; at least 1.
    ///   - low: How many waiting elements resume it; 0 or more, less than `high`.
    package init(high: Int, low: Int) {
        self.high = high
        self.low = low
    }
}
