import AbleIO
import Synchronization

/// A characteristic's own socket, acquired from a backend: writes without response go into it,
/// or notifications come out of it, one `SOCK_SEQPACKET` message per value.
///
/// BlueZ hands one out for `GattCharacteristic1.AcquireWrite` and `AcquireNotify` (one end of an
/// `AF_UNIX` socketpair whose other end `bluetoothd` serves); the simulator makes a socketpair
/// itself. Either way the socket runs on an ``L2CAPChannel``'s engine: nonblocking, driven by
/// the sockets' event loop, sends waiting for room (never dropped), and received values handed
/// from the socket's read handler straight to whoever takes them (a notification stream's buffer, with its
/// own documented policy), every message that is ready in one run.
///
/// The socket is released by closing it: the backend's end then sees the hang-up, as BlueZ does.
/// It ends by itself when the backend closes its end (the link dropped, the characteristic went
/// away): ``isOpen`` turns false and `onEnd` runs once.
package final class AcquiredSocket: Sendable {
    /// The engine that owns the descriptor.
    package let channel: L2CAPChannel
    /// The link's ATT MTU as the backend reported it when the socket was acquired.
    package let attMTU: Int
    private let ended: Lock<Bool>
    private let sent = Lock(0)

    /// The longest value one message may carry: the ATT MTU less the 3-byte ATT header, and no
    /// more than an attribute value's 512 bytes (Core 5.3 Vol 3 Part F 3.2.9), whatever the MTU.
    /// BlueZ reads the socket into a 512-byte buffer (`src/gatt-client.c` `sock_read`, 5.66 and
    /// 5.82 alike), so a longer message would reach the peripheral cut short, without an error.
    package var maximumValueLength: Int { max(min(attMTU - 3, Self.maximumAttributeValueLength), 1) }

    /// Whether `value` fits one message: not empty, and at most ``maximumValueLength`` bytes.
    package func fits(_ value: [UInt8]) -> Bool {
        !value.isEmpty && value.count <= maximumValueLength
    }

    /// The longest value an attribute may hold (Core 5.3 Vol 3 Part F 3.2.9).
    package static let maximumAttributeValueLength = 512

    /// Whether neither side has closed the socket yet.
    package var isOpen: Bool { !ended.withLock { $0 } }

    /// Set when ``release(drainLimit:)`` starts: from then on the socket takes no new writes,
    /// although it stays open until the peer has read what was sent.
    private let retired = Atomic<Bool>(false)

    /// Whether the socket is open and not being released: a writer may still use it.
    package var acceptsWrites: Bool { !retired.load(ordering: .acquiring) && isOpen }

    /// Takes over a connected `SOCK_SEQPACKET` socket.
    ///
    /// - Parameters:
    ///   - socket: The descriptor; the socket owns it from now on, also when this throws.
    ///   - attMTU: The ATT MTU the backend reported.
    ///   - onValue: Called with each received message, in order, on the sockets' event loop,
    ///     straight from the socket's read handler: no task and no buffer in between, and the values of one
    ///     run of the handler (every message that was ready) go out as one `DeliveryBatch` when
    ///     there are several, so a stream's consumer is woken once for them. It must not block. A write socket's peer
    ///     sends nothing: the default drops what it might send.
    ///   - onEnd: Called once when the socket ends, from either side (after the last value), on the
    ///     sockets' event loop. It must not block.
    package init(
        socket: CInt, attMTU: Int, onValue: @escaping @Sendable ([UInt8]) -> Void = { _ in },
        onEnd: @escaping @Sendable () -> Void = {}
    ) throws {
        let ended = Lock(false)
        let channel: L2CAPChannel
        do {
            // A value is at most 512 bytes; the receive buffer takes any message a peer sends.
            // A write socket's peer sends nothing; what it might send is dropped. Either way the
            // end is seen on the loop, with no task watching the socket. (`onValue` is not an
            // optional: a closure kept in an `Optional` is stored in its most general form, and
            // each value would go through two reabstraction thunks.)
            channel = try L2CAPChannel.wrapping(
                socket: socket, sendMTU: max(min(attMTU - 3, Self.maximumAttributeValueLength), 1), receiveMTU: 2048,
                directReceiver: ChannelCore.DirectReceiver(
                    packet: onValue,
                    end: { _ in
                        ended.withLock { $0 = true }
                        onEnd()
                    }))
        } catch {
            _ = SocketOperations.system.close(socket)
            throw error
        }
        self.channel = channel
        self.attMTU = attMTU
        self.ended = ended
    }

    /// Sends one value as one message, waiting while the socket is full; see ``L2CAPChannel/send(_:)``.
    package func send(_ value: [UInt8], isolation actor: isolated (any Actor)? = #isolation) async throws {
        do { try await channel.core.send(value) } catch { throw BluetoothError.publishing(error) }
        sent.withLock { $0 += 1 }
    }

    /// Sends `values` in order, each as one message, waiting while the socket is full; the caller
    /// is woken once, when the socket has taken the last of them. See
    /// `ChannelCore`'s `send(contentsOf:)` for what went out when it throws.
    package func send(
        contentsOf values: ArraySlice<[UInt8]>, isolation actor: isolated (any Actor)? = #isolation
    ) async throws {
        do { try await channel.core.send(contentsOf: values) } catch { throw BluetoothError.publishing(error) }
        sent.withLock { $0 += values.count }
    }

    /// How many values the sends have put into the socket: for a simulated peer that
    /// counts what it has taken out.
    package var sentCount: Int { sent.withLock { $0 } }

    /// How many bytes sent into the socket its peer has not read yet (`ioctl(SIOCOUTQ)`).
    package var unreadByteCount: Int { channel.unreadByteCount }

    /// Closes the socket, which releases it in the backend, after the peer has read what was
    /// sent (at most `drainLimit` later), since BlueZ drops what it had not read when it sees the
    /// hang-up.
    package func release(drainLimit: Duration = .seconds(2)) async {
        retired.store(true, ordering: .releasing)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: drainLimit)
        while isOpen, unreadByteCount > 0, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(1))
        }
        await channel.close()
        ended.withLock { $0 = true }
    }
}
