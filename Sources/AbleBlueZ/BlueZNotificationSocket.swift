import Able
import AbleDBus
import AbleStreams

#if canImport(Glibc)
    import Glibc
#endif

/// A characteristic's notification socket (`GattCharacteristic1.AcquireNotify`), read on the
/// D-Bus connection's event loop: each readiness event receives the messages there (one per
/// notification, as `bluetoothd` writes them) and hands them to `onValue` on the loop's thread, as the bus path
/// hands a `PropertiesChanged` over. No dispatch source and no task sit between the socket and
/// the streams, so a notification costs one wake-up of the loop and one of the consumer; the
/// streams' own buffers (``NotificationStream``'s policy) are the only buffering.
///
/// The socket is released by ``release()``, which closes it: BlueZ sees the hang-up and disables
/// notifications. It ends by itself when BlueZ closes its end (the link dropped, the
/// characteristic went away): `onEnd` runs once, on the loop's thread.
final class BlueZNotificationSocket: Sendable {
    private struct State {
        /// The descriptor BlueZ passed, until released or ended; the loop watches a duplicate.
        var descriptor: CInt?
        var stopWatching: (@Sendable () -> Void)?
    }

    private let state: Lock<State>

    /// The longest message taken in one piece: a notification carries at most the ATT MTU (517 at
    /// most) less its 3-byte header; a longer message would be cut, so the buffer is far larger.
    private static let bufferSize = 2048

    /// The most messages taken in one readiness event; the loop comes back for the rest.
    private static let batch = 64

    /// Watches `descriptor` on `executor`'s loop; the socket owns the descriptor from now on.
    init(
        descriptor: CInt, executor: DBusExecutor, onValue: @escaping @Sendable ([UInt8]) -> Void,
        onEnd: @escaping @Sendable () -> Void
    ) {
        let state = Lock(State(descriptor: descriptor))
        self.state = state
        let stop = executor.watchReadable(descriptor) {
            // On the loop's thread. Takes what is there, up to a batch, so that a burst is read
            // with one wake-up of the loop (bluetoothd drops a notification it cannot write, so the
            // socket must not fill); the lock keeps `release()` from closing the descriptor under
            // the receives, which never wait.
            var ended = false
            let values: [[UInt8]] = state.withLock { state in
                guard let descriptor = state.descriptor else { return [] }
                var values: [[UInt8]] = []
                while values.count < Self.batch, let value = Self.receive(from: descriptor, ended: &ended) {
                    values.append(value)
                }
                return values
            }
            for value in values { onValue(value) }
            if ended, Self.end(state) { onEnd() }
        }
        let released = state.withLock { state in
            guard state.descriptor != nil else { return true }
            state.stopWatching = stop
            return false
        }
        if released { stop() }
    }

    /// Closes the socket, which releases it in BlueZ. `onEnd` is not called.
    func release() {
        _ = Self.end(state)
    }

    /// Receives one message without waiting: `nil` when there is none (or the receive was
    /// interrupted: the level-triggered loop asks again), with `ended` set at the end of the
    /// connection or on an error.
    private static func receive(from descriptor: CInt, ended: inout Bool) -> [UInt8]? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: bufferSize) { buffer in
            let received = Glibc.recv(descriptor, buffer.baseAddress, bufferSize, CInt(MSG_DONTWAIT))
            if received > 0 { return Array(buffer[..<received]) }
            if received == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { ended = true }
            return nil
        }
    }

    /// Stops watching and closes the descriptor; returns whether this call did it.
    private static func end(_ state: Lock<State>) -> Bool {
        let (descriptor, stop) = state.withLock { state in
            defer { state = State(descriptor: nil, stopWatching: nil) }
            return (state.descriptor, state.stopWatching)
        }
        guard let descriptor else { return false }
        stop?()
        close(descriptor)
        return true
    }
}
