#if canImport(Glibc)
    import Glibc
#endif

/// A nonblocking `connect(2)` under way, on the sockets' event loop: the socket watched until it
/// becomes writable (connected, or failed with `SO_ERROR`), a timer for the timeout, and the
/// task's cancellation handler for the caller giving up; the first of the three decides.
///
/// The waiting caller is resumed only once the loop has let go of the socket, so that it is no
/// longer watched when the caller goes on to use or close it.
package final class PendingConnect: Sendable {
    private struct State {
        package var continuation: UnsafeContinuation<Void, any Error>?
        package var outcome: Result<Void, any Error>?
        package var released = false
    }

    private let socket: CInt
    private let operations: SocketOperations
    private let loop: EventLoop
    private let describe: @Sendable (Errno) -> any Error
    private let state = Lock(State())
    private let watch: LoopSocket

    /// Watches `socket`, whose `connect(2)` returned `EINPROGRESS`.
    private init(
        socket: CInt,
        operations: SocketOperations,
        loop: EventLoop,
        describe: @escaping @Sendable (Errno) -> any Error
    ) {
        self.socket = socket
        self.operations = operations
        self.loop = loop
        self.describe = describe
        watch = LoopSocket(descriptor: socket, loop: loop)
    }

    /// Waits for a connection started with a nonblocking `connect(2)` to complete.
    ///
    /// - Parameters:
    ///   - socket: The connecting socket.
    ///   - operations: The socket calls.
    ///   - loop: Where to watch the socket.
    ///   - timeout: How long to wait.
    ///   - describe: The error for a connection that failed with an errno.
    /// - Throws: What `describe` makes of the `errno` when `SO_ERROR` reports a failure,
    ///   ``SocketError`` (``SocketError/Reason/timedOut``) after `timeout`, `CancellationError` when the task is
    ///   cancelled. The caller still owns the socket in every case.
    package static func wait(
        socket: CInt,
        operations: SocketOperations,
        loop: EventLoop = .sockets,
        timeout: Duration,
        describe: @escaping @Sendable (Errno) -> any Error
    ) async throws {
        let pending = PendingConnect(socket: socket, operations: operations, loop: loop, describe: describe)
        try await pending.wait(timeout: timeout)
    }

    private func wait(timeout: Duration) async throws {
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        let timer = LoopTimer {
            self.decide(.failure(SocketError(.timedOut, message: "the L2CAP connection took longer than \(timeout)")))
        }
        loop.execute { [loop] in
            timer.deadline = LoopTimer.now() &+ UInt64(clamping: nanoseconds)
            loop.add(timer)
        }
        watch.start(interest: .write, readable: {}, writable: { self.writable() })
        defer {
            // Whoever decided, the timer goes (firing disarmed it, but it is still listed).
            loop.execute { [loop] in loop.remove(timer) }
        }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<Void, any Error>? in
                    guard state.released, let outcome = state.outcome else {
                        state.continuation = continuation
                        return nil
                    }
                    return outcome
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            decide(.failure(CancellationError()))
        }
    }

    /// The socket is writable: the connection is up, or `SO_ERROR` says why not.
    private func writable() {
        switch operations.integerOption(socket, level: SOL_SOCKET, name: SO_ERROR, size: 4) {
        case .success(0): decide(.success(()))
        case .success(let error): decide(.failure(describe(Errno(CInt(error)))))
        case .failure(let errno): decide(.failure(describe(errno)))
        }
    }

    /// Records the first outcome and stops watching the socket.
    private func decide(_ outcome: Result<Void, any Error>) {
        let first = state.withLock { state in
            guard state.outcome == nil else { return false }
            state.outcome = outcome
            return true
        }
        guard first else { return }
        watch.cancel { self.released() }
    }

    /// The loop no longer watches the socket: resume the caller.
    private func released() {
        let ready = state.withLock { state -> (UnsafeContinuation<Void, any Error>, Result<Void, any Error>)? in
            state.released = true
            guard let continuation = state.continuation, let outcome = state.outcome else { return nil }
            state.continuation = nil
            return (continuation, outcome)
        }
        if let (continuation, outcome) = ready { continuation.resume(with: outcome) }
    }
}
