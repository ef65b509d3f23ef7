import AbleIO

/// The channels peers open to an ``L2CAPListener``, in the order they were accepted.
///
/// ```swift
/// for try await channel in listener.channels {
///     Task { try await serve(channel) }
/// }
/// ```
///
/// **Buffering:** the listener accepts connections as they come, each as a channel that starts
/// receiving at once, and stops accepting while 16 accepted channels wait for the consumer; it
/// accepts again when the consumer has taken them down to 4. Meanwhile the kernel keeps further
/// connections in the listen backlog, and refuses them once the backlog is full. Nothing is
/// dropped.
///
/// **End:** the stream returns `nil` once the listener is closed and the channels accepted
/// before were taken; it throws ``BluetoothError`` if accepting fails for another reason.
///
/// Cancelling the task that iterates ends the stream: `next()` returns `nil` once the values
/// already buffered are taken, and the work behind the stream stops. Here the work is
/// listening: the listener closes its socket, and the kernel refuses further connections.
///
/// - Important: Each channel goes to one iterator. Iterate from one task at a time. A channel
///   that is never taken from the stream closes when the stream goes away.
public struct L2CAPChannelStream: AsyncSequence, Sendable {
    public typealias Element = L2CAPChannel
    public typealias Failure = any Error

    let buffer: WatermarkBuffer<L2CAPChannel>

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer)
    }

    /// The iterator of a channel stream; not `Sendable`.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: WatermarkBuffer<L2CAPChannel>

        /// The next channel a peer opened, waiting for one.
        ///
        /// - Returns: The channel, or `nil` once the listener is closed, or the task cancelled,
        ///   and every channel accepted before was taken.
        /// - Throws: ``BluetoothError`` once, if accepting failed.
        public mutating func next() async throws -> L2CAPChannel? {
            do { return try await buffer.next(isolation: nil) } catch { throw BluetoothError.publishing(error) }
        }

        /// The next channel a peer opened, waiting for one, without leaving the caller's actor.
        ///
        /// - Parameter actor: The caller's actor.
        /// - Returns: The channel, or `nil` once the listener is closed, or the task cancelled,
        ///   and every channel accepted before was taken.
        /// - Throws: ``BluetoothError`` once, if accepting failed.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> L2CAPChannel? {
            do { return try await buffer.next(isolation: actor) } catch { throw BluetoothError.publishing(error) }
        }
    }
}
