/// Runs `operation` for at most `limit`: its result, or `nil` when the time ran out first (the
/// operation is cancelled then).
package func withTimeLimit<T: Sendable>(
    _ limit: Duration, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}

/// Runs `operation`, throwing ``BluetoothError/Code/timeout`` when it takes longer than `timeout`;
/// the operation is cancelled then.
package func withDeadline<T: Sendable>(
    _ timeout: Duration, what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    guard let value = try await withTimeLimit(timeout, operation) else {
        // Time and a cancellation can run out together: the cancellation is what the caller asked for.
        try Task.checkCancellation()
        throw BluetoothError(.timeout, message: "\(what) took longer than \(timeout)")
    }
    return value
}
