import Synchronization

/// The continuation of one method call awaiting its reply, resumed exactly once: by the reply,
/// by its timeout, by cancellation or an interruption, or by the connection's loss. (The state below
/// guarantees that, so the continuation is an unchecked one: a checked one costs an allocation
/// per call.)
///
/// The state is an atomic rather than a `Lock`: a `Lock` is a second allocation per call, and its
/// generic code, compiled in another module, looks up its metadata on every call. The continuation
/// is written once, before the state says `waiting`, and read only by whoever moves the state from
/// `waiting` to `finished`: the atomic's ordering makes the write visible to that reader.
final class PendingReply: Sendable {
    private enum State: Int, AtomicRepresentable {
        /// Neither installed nor resumed.
        case idle
        /// The continuation is installed and waits.
        case waiting
        /// Resumed (or cancelled before it was installed).
        case finished
    }

    private let state = Atomic<State>(.idle)
    nonisolated(unsafe) private var continuation: UnsafeContinuation<[DBusValue], any Error>?

    /// The serial the call went out with, which its reply names; 0 until it is sent. Set and read
    /// on the connection's event loop only.
    nonisolated(unsafe) var serial: UInt32 = 0

    /// Whether the caller was resumed already (by cancellation, typically).
    var isFinished: Bool { state.load(ordering: .acquiring) == .finished }

    /// Installs the continuation; returns `false` (and resumes it with `CancellationError`) when
    /// the call was cancelled first.
    func install(_ continuation: UnsafeContinuation<[DBusValue], any Error>) -> Bool {
        self.continuation = continuation
        let installed = state.compareExchange(expected: .idle, desired: .waiting, ordering: .acquiringAndReleasing)
            .exchanged
        if !installed { continuation.resume(throwing: CancellationError()) }
        return installed
    }

    /// Resumes the caller unless it was already resumed; returns whether this call resumed it.
    @discardableResult
    func resume(with result: Result<[DBusValue], any Error>) -> Bool {
        // Cancelled before the continuation was installed: install() will see it.
        if state.compareExchange(expected: .idle, desired: .finished, ordering: .acquiringAndReleasing).exchanged {
            return false
        }
        guard state.compareExchange(expected: .waiting, desired: .finished, ordering: .acquiringAndReleasing).exchanged,
            let continuation
        else { return false }
        continuation.resume(with: result)
        return true
    }
}
