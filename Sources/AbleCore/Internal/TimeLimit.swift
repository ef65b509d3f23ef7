/// Runs `operation` for at most `limit`: its result, or `nil` when the time ran out first (the
/// operation is cancelled then).
///
/// `sleep` measures the limit: the wall clock by default, an adapter's clock
/// (``Adapter/sleep(for:)``) for work on that adapter, so that a simulated one runs on simulated time.
package func withTimeLimit<T: Sendable>(
    _ limit: Duration, sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await sleep(limit)
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}

/// Runs `operation`, throwing ``BluetoothError/Code/timeout`` when it takes longer than `timeout`;
/// the operation is cancelled then.
package func withDeadline<T: Sendable>(
    _ timeout: Duration, what: String,
    sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    guard let value = try await withTimeLimit(timeout, sleep: sleep, operation) else {
        // Time and a cancellation can run out together: the cancellation is what the caller asked for.
        try Task.checkCancellation()
        throw BluetoothError(.timeout, message: "\(what) took longer than \(timeout)")
    }
    return value
}
