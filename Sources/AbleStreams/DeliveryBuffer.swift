import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The bounded buffer behind Able's hot streams (``DBusSignalStream``, notification and scan
/// streams): a producer yields into it from wherever values arrive, without a task or a hop, and
/// one consumer takes them in a `for try await` loop.
///
/// Values yielded during a ``DeliveryBatch`` (everything one read from a bus connection
/// brought) wake a waiting consumer once, when the batch ends, instead of once per value: a
/// wake-up costs a thread switch, so a burst of signals costs one. Elsewhere a yield wakes the
/// consumer at once.
///
/// When the buffer holds `limit` values, the policy decides: ``Policy/dropNewest`` refuses the
/// new value, ``Policy/dropOldest`` pushes out the oldest; either way the drop is counted and
/// nothing is reordered. The stream ends when the producer finishes it (values already buffered
/// are still delivered, then the error, if any, is thrown), when the consumer's task is
/// cancelled while it waits, or when ``finish(throwing:)`` is called by whoever ends the stream's
/// lifetime; `onTermination` then runs once.
package final class DeliveryBuffer<Element: Sendable>: Sendable {
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
        /// The stream had ended; the value was discarded.
        case terminated
    }

    private struct State: ~Copyable {
        /// Buffered values from `head` on; the slots before `head` were taken and are reclaimed
        /// when the array is compacted.
        var elements: [Element] = []
        var head = 0
        var waiter: UnsafeContinuation<Void, Never>?
        /// Whether the waiter is to be woken when the current batch ends.
        var inBatch = false
        /// Set when the stream ended: `.success` for a normal end.
        var end: Result<Void, any Error>?
        var dropped = 0
        /// Values taken with ``DeliveryBuffer/nextHeld(isolation:)`` and not yet released.
        var held = 0
        var onTermination: (@Sendable () -> Void)?

        var count: Int { elements.count - head }

        mutating func removeFirst() -> Element {
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

    private enum Step {
        case value(Element)
        case ended(Result<Void, any Error>)
        case wait
    }

    private let state = Mutex(State())
    private let limit: Int
    private let policy: Policy

    /// A buffer of at most `limit` values (at least one) with the given policy when full.
    package init(limit: Int, policy: Policy) {
        self.limit = max(limit, 1)
        self.policy = policy
    }

    // MARK: Producing

    /// Adds a value; wakes a waiting consumer at once, or when the current batch ends.
    @discardableResult
    package func yield(_ element: Element) -> YieldResult {
        let batch = DeliveryBatch.current
        let (result, waiter): (YieldResult, UnsafeContinuation<Void, Never>?) = state.withLock { state in
            guard state.end == nil else { return (.terminated, nil) }
            var result = YieldResult.enqueued
            if state.count >= limit {
                state.dropped += 1
                result = .dropped
                switch policy {
                case .dropNewest: return (.dropped, nil)
                case .dropOldest: _ = state.removeFirst()
                }
            }
            state.elements.append(element)
            guard state.waiter != nil else { return (result, nil) }
            if let batch {
                if !state.inBatch {
                    state.inBatch = true
                    batch.defer(self)
                }
                return (result, nil)
            }
            defer { state.waiter = nil }
            return (result, state.waiter)
        }
        waiter?.resume()
        return result
    }

    /// Ends the stream: values already buffered are still delivered, then `error` (if any) is
    /// thrown to the consumer. Later calls and yields do nothing.
    package func finish(throwing error: (any Error)? = nil) {
        let (waiter, onTermination) = state.withLock { state in
            guard state.end == nil else {
                return (nil, nil) as (UnsafeContinuation<Void, Never>?, (@Sendable () -> Void)?)
            }
            state.end = error.map { .failure($0) } ?? .success(())
            defer {
                state.waiter = nil
                state.onTermination = nil
            }
            return (state.waiter, state.onTermination)
        }
        waiter?.resume()
        onTermination?()
    }

    /// Runs `handler` once when the stream ends, however it ends (at once if it has ended).
    package func onTermination(_ handler: @escaping @Sendable () -> Void) {
        let ended = state.withLock { state in
            if state.end != nil { return true }
            state.onTermination = handler
            return false
        }
        if ended { handler() }
    }

    /// Wakes the consumer if a batch held back its wake-up.
    fileprivate func endBatch() {
        let waiter = state.withLock { state -> UnsafeContinuation<Void, Never>? in
            guard state.inBatch else { return nil }
            state.inBatch = false
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    // MARK: Observing

    /// How many values were dropped by the full buffer.
    package var droppedCount: Int { state.withLock { $0.dropped } }

    /// How many values wait for the consumer.
    package var bufferedCount: Int { state.withLock { $0.count } }

    /// Whether values wait for the consumer, or were taken and are still held
    /// (``nextHeld(isolation:)``): the simulated radio's clock lets the consumer deal with them
    /// before it moves time on.
    package var hasUntakenElements: Bool { state.withLock { $0.count > 0 || $0.held > 0 } }

    /// Whether the consumer is suspended, waiting for a value.
    package var isConsumerWaiting: Bool { state.withLock { $0.waiter != nil } }

    // MARK: Consuming

    /// The next value, waiting for one; `nil` once the stream ended normally or the consumer's
    /// task was cancelled.
    package func next(isolation actor: isolated (any Actor)? = #isolation) async throws -> Element? {
        try await next(holding: false)
    }

    /// Like ``next(isolation:)``, but the value counts as untaken (``hasUntakenElements``) until
    /// ``releaseHeld()``: for a consumer that takes a value before it knows it will keep it.
    package func nextHeld(isolation actor: isolated (any Actor)? = #isolation) async throws -> Element? {
        try await next(holding: true)
    }

    /// Lets go of a value taken with ``nextHeld(isolation:)``.
    package func releaseHeld() {
        state.withLock { $0.held -= 1 }
    }

    private func next(
        holding: Bool, isolation actor: isolated (any Actor)? = #isolation
    ) async throws -> Element? {
        while true {
            let step = state.withLock { state -> Step in
                if state.count > 0 {
                    if holding { state.held += 1 }
                    return .value(state.removeFirst())
                }
                if let end = state.end { return .ended(end) }
                return .wait
            }
            switch step {
            case .value(let element): return element
            case .ended(let end):
                try end.get()
                return nil
            case .wait:
                if Task.isCancelled {
                    finish()
                    return nil
                }
                await withTaskCancellationHandler {
                    await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<Void, Never>) in
                        let ready = state.withLock { state in
                            guard state.count == 0, state.end == nil else { return true }
                            state.waiter = continuation
                            return false
                        }
                        if ready { continuation.resume() }
                    }
                } onCancel: {
                    finish()
                }
            }
        }
    }
}

/// Ends a stream's buffer when the last copy of the stream value goes away (even if it was never
/// iterated), and, through ``forIterator()``, when an iterator goes away, so that leaving a
/// `for try await` loop ends the work behind the stream while the stream is still referenced.
package final class IterationLifetime<Element: Sendable>: Sendable {
    private let buffer: DeliveryBuffer<Element>

    package init(_ buffer: DeliveryBuffer<Element>) {
        self.buffer = buffer
    }

    /// A lifetime of its own for one iterator.
    package func forIterator() -> IterationLifetime { IterationLifetime(buffer) }

    deinit {
        buffer.finish()
    }
}

/// The values that one dispatch of a bus connection hands to ``DeliveryBuffer``s: their
/// consumers are woken once, when the batch ends.
///
/// A batch belongs to the thread that runs it (libdbus dispatches on one connection's queue at a
/// time); batches do not nest: an inner ``run(_:)`` joins the outer one.
package final class DeliveryBatch {
    private var deferred: [any DeferredWake] = []

    package init() {}

    /// The batch running on this thread, if any.
    package static var current: DeliveryBatch? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<DeliveryBatch>.fromOpaque(pointer).takeUnretainedValue()
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key for delivery batches")
        return key
    }()

    /// Runs `body` as this batch, then wakes the consumers it held back.
    package func run<Result>(_ body: () throws -> Result) rethrows -> Result {
        guard Self.current == nil else { return try body() }
        pthread_setspecific(Self.key, Unmanaged.passUnretained(self).toOpaque())
        defer {
            pthread_setspecific(Self.key, nil)
            let buffers = deferred
            deferred.removeAll(keepingCapacity: true)
            for buffer in buffers { buffer.endBatch() }
        }
        return try body()
    }

    fileprivate func `defer`(_ buffer: some DeferredWake) {
        deferred.append(buffer)
    }
}

private protocol DeferredWake: AnyObject {
    func endBatch()
}

extension DeliveryBuffer: DeferredWake {}

// Generic code called from another module runs unspecialized (a metadata lookup and value
// witness calls for every value); these entry points are compiled for byte arrays, the
// elements of Able's notification streams, the busiest of all.
extension DeliveryBuffer where Element == [UInt8] {
    /// ``yield(_:)`` for byte arrays.
    @discardableResult
    package func yieldBytes(_ bytes: [UInt8]) -> YieldResult {
        yield(bytes)
    }

    /// ``next(isolation:)`` for byte arrays.
    package func nextBytes(isolation actor: isolated (any Actor)? = #isolation) async throws -> [UInt8]? {
        try await next(holding: false)
    }
}
