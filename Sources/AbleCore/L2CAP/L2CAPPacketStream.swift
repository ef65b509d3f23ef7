import AbleIO

/// The SDUs a peer sends on an ``L2CAPChannel``, one element per SDU, in order.
///
/// ```swift
/// for try await packet in channel.packets {
///     try await channel.send(reply(to: packet))
/// }
/// ```
///
/// **Buffering:** the channel reads SDUs from its socket as they arrive, in the socket's
/// handler on Able's sockets event loop, straight into this stream's buffer, and stops reading when
/// ``Watermarks/high`` SDUs (1024 by default) wait for the consumer. It reads again once the
/// consumer has taken the buffer down to ``Watermarks/low`` (256 by default). While it does not
/// read, the SDUs stay in the kernel's socket buffer and, on a Bluetooth link, the peer runs out
/// of LE credits and stops sending. An iteration that finds the buffer empty receives from the
/// socket itself, on its own thread, before it waits. Nothing is dropped and nothing is
/// reordered; the buffer holds at most `high` SDUs of at most ``L2CAPChannel/receiveMTU`` bytes
/// each (an SDU of half the MTU or more may keep an array of the MTU's capacity).
///
/// Each SDU is an array of its own, which the consumer owns. So that arrays of large SDUs,
/// freed one after another, do not make glibc's malloc give their pages back to the kernel and
/// take them again for the next ones, the first channel with a receive MTU over 16 KiB raises
/// glibc's trim threshold to 2 MiB for the process, as glibc itself does after a program frees
/// a block of 1 MiB.
///
/// Keep reading while you send: a peer that stops reading because it waits for you to read
/// stalls both directions once both buffers are full. The default bound lets each side send
/// 1,000 SDUs of 672 bytes before reading any.
///
/// **End:** the stream returns `nil` after the last SDU when the channel is closed from either
/// side (on a Bluetooth link, a peer's L2CAP Disconnection Request is such a close), and throws
/// ``BluetoothError`` with ``BluetoothError/Code/disconnected`` when the connection is reset or
/// the link under it is lost (`ECONNRESET`, `ECONNABORTED`, `ETIMEDOUT`). SDUs that arrived
/// before the end are delivered first. Either way, a later ``L2CAPChannel/send(_:)`` throws
/// ``BluetoothError/Code/disconnected``.
///
/// Cancelling the task that iterates ends the stream: `next()` returns `nil` once the values
/// already buffered are taken, and the work behind the stream stops. Here the work is
/// delivering SDUs: the channel stays open for ``L2CAPChannel/send(_:)``, and discards the SDUs
/// that arrive from then on. It still reads them, so that the peer's LE credits keep flowing
/// and its close is still noticed.
///
/// - Important: Each SDU goes to one iterator. Iterate from one task at a time: a second task
///   that waits while another waits gets ``BluetoothError/Code/inProgress``. The stream does not
///   keep the channel open: when the channel goes away, the stream ends.
public struct L2CAPPacketStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    public typealias Failure = any Error

    let buffer: WatermarkBuffer<[UInt8]>

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer)
    }

    /// The iterator of a packet stream; not `Sendable`.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: WatermarkBuffer<[UInt8]>

        /// The next SDU, waiting for one if none has arrived.
        ///
        /// - Returns: The SDU, or `nil` once the channel is closed, or the task cancelled, and
        ///   every SDU that had arrived was taken.
        /// - Throws: ``BluetoothError`` (``BluetoothError/Code/disconnected``) once, when the
        ///   connection was reset.
        public mutating func next() async throws -> [UInt8]? {
            do { return try await buffer.next(isolation: nil) } catch { throw BluetoothError.publishing(error) }
        }

        /// The next SDU, waiting for one if none has arrived, without leaving the caller's actor.
        ///
        /// - Parameter actor: The caller's actor.
        /// - Returns: The SDU, or `nil` once the channel is closed, or the task cancelled, and
        ///   every SDU that had arrived was taken.
        /// - Throws: ``BluetoothError`` (``BluetoothError/Code/disconnected``) once, when the
        ///   connection was reset.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> [UInt8]? {
            do { return try await buffer.next(isolation: actor) } catch { throw BluetoothError.publishing(error) }
        }
    }
}

extension L2CAPPacketStream {
    /// When a channel stops and restarts reading from its socket.
    ///
    /// The channel stops reading when `high` SDUs wait in the stream and reads again when the
    /// consumer has taken them down to `low`.
    public struct Watermarks: Hashable, Sendable {
        /// How many unread SDUs stop reading; at least 1.
        public var high: Int
        /// How many unread SDUs restart reading; less than ``high``.
        public var low: Int

        /// Creates watermarks.
        ///
        /// - Parameters:
        ///   - high: How many unread SDUs stop reading; at least 1.
        ///   - low: How many unread SDUs restart reading; 0 or more, less than `high`.
        public init(high: Int, low: Int) {
            precondition(high >= 1, "the high watermark must be at least 1")
            precondition(low >= 0 && low < high, "the low watermark must be at least 0 and below the high watermark")
            self.high = high
            self.low = low
        }

        /// 1024 and 256 SDUs.
        public static let `default` = Watermarks(high: 1024, low: 256)
    }
}
