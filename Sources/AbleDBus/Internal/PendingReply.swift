import AbleStreams

/// The continuation of one method call awaiting its reply, resumed exactly once: by the reply,
/// by its timeout, by cancellation or an interruption, or by the connection's loss. (The state below
/// guarantees that, so the continuation is an unchecked one: a checked one costs an allocation
/// per call.)
final class PendingReply: Sendable {
    private enum State {
        case idle
        case waiting(UnsafeContinuation<[DBusValue], any Error>)
        case finished
    }

    private let state = Lock(State.idle)

    /// The serial the call went out with, which its reply names; 0 until it is sent. Set and read
    /// on the connection's event loop only.
    nonisolated(unsafe) var serial: UInt32 = 0

    /// Installs the continuation; returns `false` (and resumes it with `CancellationError`) when
    /// the call was cancelled first.
    func install(_ continuation: UnsafeContinuation<[DBusValue], any Error>) -> Bool {
        let installed = state.withLock { state in
            guard case .idle = state else { return false }
            state = .waiting(continuation)
            return true
        }
        if !installed { continuation.resume(throwing: CancellationError()) }
        return installed
    }

    /// Resumes the caller unless it was already resumed; returns whether this call resumed it.
    @discardableResult
    func resume(with result: Result<[DBusValue], any Error>) -> Bool {
        let continuation: UnsafeContinuation<[DBusValue], any Error>? = state.withLock { state in
            switch state {
            case .waiting(let continuation):
                state = .finished
                return continuation
            case .idle:
                // Cancelled before the continuation was installed: install() will see it.
                state = .finished
                return nil
            case .finished:
                return nil
            }
        }
        continuation?.resume(with: result)
        return continuation != nil
    }
}
