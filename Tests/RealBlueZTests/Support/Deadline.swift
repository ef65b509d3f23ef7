import Able

/// A wait that ran out of time.
struct TimedOut: Error, CustomStringConvertible {
    var waitingFor: String
    var timeout: Duration
    var description: String { "timed out after \(timeout) waiting for \(waitingFor)" }
}

/// A signal stream that ended before the awaited signal arrived.
struct StreamEnded: Error, CustomStringConvertible {
    var waitingFor: String
    var description: String { "the signal stream ended while waiting for \(waitingFor)" }
}

/// Runs `body`, cancelling it after `timeout`.
///
/// - Throws: ``TimedOut`` naming `what` when `timeout` elapses first; what `body` throws.
func withDeadline<T: Sendable>(
    _ timeout: Duration, waitingFor what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask(operation: body)
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimedOut(waitingFor: what, timeout: timeout)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// Calls `attempt` every `interval` until it returns a value, for at most `timeout`.
///
/// - Throws: ``TimedOut`` naming `what` when the time runs out.
func poll<T>(
    every interval: Duration = .milliseconds(500), timeout: Duration, waitingFor what: String,
    _ attempt: () async -> T?
) async throws -> T {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while true {
        if let value = await attempt() { return value }
        guard clock.now < deadline else { throw TimedOut(waitingFor: what, timeout: timeout) }
        try await Task.sleep(for: interval)
    }
}

/// Runs `body`, then `cleanup` whether `body` returned or threw.
///
/// `cleanup` runs even when the test's task was cancelled (by a time limit, for example), so
/// that it still talks to BlueZ.
func withCleanup<T>(
    _ body: () async throws -> T, cleanup: @escaping @Sendable () async -> Void
) async throws -> T {
    let result: T
    do {
        result = try await body()
    } catch {
        await runEvenIfCancelled(cleanup)
        throw error
    }
    await runEvenIfCancelled(cleanup)
    return result
}
