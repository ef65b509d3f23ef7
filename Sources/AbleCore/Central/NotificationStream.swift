package import AbleIO

/// The values a characteristic notifies or indicates, for `for try await`.
///
/// The stream is attached before notifications are enabled, so the first value is never lost.
/// Several streams of one characteristic share one subscription in BlueZ, which Able ends
/// (`StopNotify`) when the last of them ends. BlueZ also reports a value read with
/// ``Peripheral/read(_:)`` as a change, so it appears here too.
///
/// **Buffering:** up to 16,384 values the consumer has not taken yet (about a second of a fast
/// link's notifications, so a consumer that stalls briefly loses nothing); when full, the
/// newest values are dropped and counted in ``droppedCount``; none are reordered. Values that
/// arrive together (one read from the bus, or every message ready on the characteristic's
/// socket) wake a waiting consumer once. While values come less than a millisecond apart, the
/// bus is read every millisecond rather than for each of them, so a value may then wait up to
/// 1 ms before it is delivered.
///
/// The values come from `PropertiesChanged` signals on the bus, or from the characteristic's
/// own socket (BlueZ `AcquireNotify`) when the stream asks for it with a ``NotificationDelivery``:
/// the API, buffering and end are the same either way.
///
/// **Lifetime:** the subscription ends when iteration ends (also after `prefix(n)` has taken its
/// values), when the iterating task is cancelled, or when the stream is discarded. The stream
/// throws ``BluetoothError`` with ``BluetoothError/Code/disconnected`` when the peripheral
/// disconnects.
///
/// Cancelling the task that iterates ends the stream: `next()` returns `nil` once the values
/// already buffered are taken, and the work behind the stream stops. Here the work is the
/// subscription: Able ends it (`StopNotify`, once no other stream of the characteristic
/// remains).
public struct NotificationStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    /// The producing end, fed by a backend straight from the bus's dispatch.
    package typealias Continuation = DeliveryBuffer<[UInt8]>

    let buffer: DeliveryBuffer<[UInt8]>
    let lifetime: IterationLifetime<[UInt8]>

    static let bufferLimit = 16_384

    static func make() -> (NotificationStream, Continuation) {
        let buffer = DeliveryBuffer<[UInt8]>(limit: bufferLimit, policy: .dropNewest)
        return (NotificationStream(buffer: buffer, lifetime: IterationLifetime(buffer)), buffer)
    }

    /// How many values were dropped because the consumer fell behind.
    public var droppedCount: Int { buffer.droppedCount }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer, stream: lifetime, lifetime: lifetime.forIterator())
    }

    /// Calls `body` with each value, in order, on the thread that receives it, until the stream
    /// ends: the cheapest way to take notifications.
    ///
    /// A `for try await` loop runs in a task, which a value has to wake (a thread switch when the
    /// loop waits, as it does at the rates real devices notify). Here no task is woken per value:
    /// Able's event loop calls `body` right where it reads the value, from the bus or from the
    /// characteristic's socket, as a C program would. Values that arrived before the call (the
    /// stream is attached before notifications are enabled) are delivered first, on the calling
    /// thread.
    ///
    /// - Important: `body` runs on Able's event loop: it must be quick and must not block or wait,
    ///   since the loop serves nothing else meanwhile (no other stream, and for values from the
    ///   bus no D-Bus call of the process). Hand longer work to a task of your own.
    ///
    /// **Buffering:** a value waits only while `body` is busy with an earlier one on another
    /// thread (values from the bus and from the socket come from different threads); then it
    /// waits in the stream's buffer, under the stream's policy, and is delivered right after.
    /// Calls of `body` never overlap.
    ///
    /// **End:** returns when the stream ends (the subscription ends with it), or throws what it
    /// ends with (``BluetoothError`` with ``BluetoothError/Code/disconnected`` when the peripheral
    /// disconnects); it returns only after the last call of `body` has returned. A stream is
    /// taken either with this or by iteration, not both.
    ///
    /// Cancelling the task that calls this ends the stream: it returns once the call of `body`
    /// under way (if any) has returned, and the work behind the stream stops. Here the work is the
    /// subscription: Able ends it (`StopNotify`, once no other stream of the characteristic
    /// remains).
    public func forEach(_ body: @escaping @Sendable (_ value: [UInt8]) -> Void) async throws {
        let lifetime = lifetime.forIterator()
        try await buffer.forEach(isolation: nil, body)
        withExtendedLifetime(lifetime) {}
    }

    /// The iterator of a notification stream; not `Sendable`. When it goes away, the stream ends.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: DeliveryBuffer<[UInt8]>
        /// Keeps the stream going while this iterator lives, even if the stream value is gone.
        let stream: IterationLifetime<[UInt8]>
        let lifetime: IterationLifetime<[UInt8]>

        public mutating func next() async throws -> [UInt8]? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> [UInt8]? {
            try await buffer.nextBytes(isolation: actor)
        }
    }
}
