public import Testing

/// Polls `condition` every 10 ms until it holds, failing the test after `timeout` (stretched by
/// ``Sanitizers/slowdown`` in a sanitizer build).
///
/// The timeout is a safety net for a condition that never comes, not a measure: a loaded
/// machine (two cores busy, heavy tests in parallel on the same two pool threads) held a
/// 300-SDU flow-control test's tasks for over 5 s, so the default is 30 s, within the suites'
/// one-minute limits.
public func waitUntil(
    timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    let timeout = timeout.allowingForSanitizers
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("condition not met within \(timeout)", sourceLocation: sourceLocation)
            return
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}
