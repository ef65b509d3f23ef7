import AbleIO

/// The signals that one subscription receives, for `for try await`.
///
/// Signals are yielded straight from the connection's dispatch into this stream's buffer, in
/// the order the bus delivered them, with no task or actor hop per signal. A waiting consumer is
/// woken once for all the signals that one read from the bus socket brought, not once per signal.
///
/// **Buffering:** the stream holds at most `bufferLimit` signals (given when subscribing) that
/// the consumer has not taken yet. When it is full, newly arriving signals are dropped and
/// counted in ``droppedCount``; none are reordered.
///
/// **Lifetime:** the subscription (and its match rule in the bus daemon) ends when iteration
/// ends (the loop is left and its iterator discarded), when the iterating task is cancelled,
/// or when the last copy of the stream is discarded. When the connection is lost the stream
/// throws a ``DBusError`` with the name ``DBusError/Name/disconnected``.
///
/// Cancelling the task that iterates ends the stream: `next()` returns `nil` once the values
/// already buffered are taken, and the work behind the stream stops. Here the work is the
/// subscription: its match rule is removed from the bus daemon.
///
/// - Important: A stream is meant for one consumer. Several iterators of one stream share its
///   signals rather than each receiving all of them.
public struct DBusSignalStream: AsyncSequence, Sendable {
    public typealias Element = DBusSignal

    let sink: SignalSink
    let lifetime: IterationLifetime<DBusSignal>

    /// How many signals were dropped because the buffer was full.
    public var droppedCount: Int { sink.buffer.droppedCount }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: sink.buffer, stream: lifetime, lifetime: lifetime.forIterator())
    }

    /// The iterator of a signal stream; not `Sendable`, like every iterator. When it goes away
    /// (the loop ended), the subscription ends.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: DeliveryBuffer<DBusSignal>
        /// Keeps the subscription going while this iterator lives, even if the stream value is gone.
        let stream: IterationLifetime<DBusSignal>
        let lifetime: IterationLifetime<DBusSignal>

        public mutating func next() async throws -> DBusSignal? {
            try await buffer.next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> DBusSignal? {
            try await buffer.next(isolation: actor)
        }
    }
}

/// Where a subscription's signals go; called on the connection's event loop.
protocol SignalReceiver: Sendable {
    /// Whether the receiver reads signals in place (``receive(_:)``) rather than taking them
    /// decoded (``yield(_:)``).
    var readsInPlace: Bool { get }
    func yield(_ signal: DBusSignal)
    func receive(_ view: DBusSignalView)
    func finish(throwing error: (any Error)?)
}

extension SignalReceiver {
    var readsInPlace: Bool { false }
    func receive(_ view: DBusSignalView) {}
}

/// The producing end of a signal stream: yielded to on the connection's event loop.
final class SignalSink: SignalReceiver {
    let buffer: DeliveryBuffer<DBusSignal>

    init(bufferLimit: Int) {
        buffer = DeliveryBuffer(limit: bufferLimit, policy: .dropNewest)
    }

    func yield(_ signal: DBusSignal) {
        buffer.yield(signal)
    }

    func finish(throwing error: (any Error)? = nil) {
        buffer.finish(throwing: error)
    }
}
