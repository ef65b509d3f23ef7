package import AbleStreams

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
