public import Testing

/// Polls `condition` every 10 ms until it holds, failing the test after `timeout` (stretched by
/// ``Sanitizers/slowdown`` in a sanitizer build), by default ``Swift/Duration/safetyNet``: a
/// safety net for a condition that never comes, not a measure.
public func waitUntil(
    timeout: Duration? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    let timeout = timeout?.allowingForSanitizers ?? .safetyNet
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("condition not met within \(timeout)", sourceLocation: sourceLocation)
            return
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}
