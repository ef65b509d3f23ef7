import AbleIO

/// An async lock that admits its holders one at a time, in the order they asked.
///
/// Actors interleave at every `await`, and BlueZ answers `InProgress` to overlapping operations
/// on one object, so operations that must not overlap run inside ``withLock(isolation:_:)``.
/// The operation runs in the caller's own task, where the caller is: a waiter costs one
/// continuation, not a task. Cancelling a waiting caller takes it out of line at once;
/// cancelling a running one cancels its operation, as it runs in the cancelled task.
package final class FIFOLock: Sendable {
    private enum Waiter: Sendable {
        /// A task waiting in ``withLock(isolation:_:)``.
        case task(UnsafeContinuation<Void, any Error>)
        /// Work queued by ``submit(_:)``, which gets a task of its own when its turn comes.
        case job(@Sendable () async -> Void)
    }

    // Each continuation is resumed exactly once: whoever takes its waiter out of the state under
    // the lock resumes it. That is why an unchecked continuation is enough.
    private let state = Lock(FIFOLockStateMachine<Waiter>())

    package init() {}

    /// How many wait for the lock now: for tests.
    package var waiterCount: Int { state.withLock { $0.waiterCount } }

    /// Runs `operation` once everything that asked for the lock before it has finished.
    ///
    /// - Throws: `CancellationError` when the task is cancelled before its turn (the operation
    ///   does not run then); what `operation` throws.
    package func withLock<T>(
        isolation: isolated (any Actor)? = #isolation, _ operation: () async throws -> sending T
    ) async throws -> sending T {
        try await lock(isolation: isolation)
        defer { unlock() }
        return try await operation()
    }

    /// Queues `operation` behind everything asked for before it, without waiting: for
    /// non-async contexts (termination handlers) whose work must keep its place in line.
    package func submit(_ operation: @escaping @Sendable () async -> Void) {
        let proceed = state.withLock { state in
            let ticket = state.takeTicket()
            return state.arrive(ticket, with: .job(operation)) == .proceed
        }
        if proceed { start(.job(operation)) }
    }

    /// Waits until everything asked for so far has run, or the task is cancelled.
    package func drain(isolation: isolated (any Actor)? = #isolation) async {
        _ = try? await withLock {}
    }

    private func lock(isolation: isolated (any Actor)?) async throws {
        try Task.checkCancellation()
        if state.withLock({ $0.lockIfFree() }) { return }
        let ticket = state.withLock { $0.takeTicket() }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
                switch state.withLock({ $0.arrive(ticket, with: .task(continuation)) }) {
                case .proceed: continuation.resume()
                case .wait: break
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            if case .task(let continuation)? = state.withLock({ $0.cancel(ticket) }) {
                continuation.resume(throwing: CancellationError())
            }
        }
    }

    private func unlock() {
        if let next = state.withLock({ $0.unlock() }) { start(next) }
    }

    /// Hands the lock to a waiter.
    private func start(_ waiter: Waiter) {
        switch waiter {
        case .task(let continuation):
            continuation.resume()
        case .job(let operation):
            Task.inheritingExecutor { [self] in
                await operation()
                unlock()
            }
        }
    }
}
