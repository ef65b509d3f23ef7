import Synchronization

/// Runs async operations one after another, in the order they were submitted.
///
/// Actors interleave at every `await`; BlueZ answers `InProgress` to overlapping operations on
/// one object, so the operations that must not overlap go through one of these.
package final class SerialTaskQueue: Sendable {
    private let tail = Mutex<Task<Void, Never>?>(nil)

    package init() {}

    /// Runs `operation` after every operation submitted before it has finished.
    ///
    /// Cancelling the calling task cancels the operation (queued or running).
    package func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = tail.withLock { tail in
            let previous = tail
            let task = Task {
                await previous?.value
                try Task.checkCancellation()
                return try await operation()
            }
            tail = Task { _ = try? await task.value }
            return task
        }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Queues `operation` behind everything submitted before it, without waiting: for
    /// non-async contexts (termination handlers) whose work must keep its place in line.
    package func submit(_ operation: @escaping @Sendable () async -> Void) {
        tail.withLock { tail in
            let previous = tail
            tail = Task {
                await previous?.value
                await operation()
            }
        }
    }

    /// Waits until everything submitted so far has run.
    package func drain() async {
        _ = try? await run {}
    }

    /// Runs an operation that reports its own failure, whatever happens to the caller.
    package func runCatching(_ operation: @escaping @Sendable () async -> Result<Void, any Error>) async -> Result<
        Void, any Error
    > {
        do {
            return try await run { await operation() }
        } catch {
            return .failure(error)
        }
    }
}
