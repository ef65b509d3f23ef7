/// Runs `cleanUp` in a task of its own, which the caller's cancellation does not reach, and waits
/// for it: for undoing what a cancelled or failed operation may have started (a `Disconnect` for a
/// pending `Connect`, a `StopNotify`, closing what a scoped call opened).
///
/// A cancelled task's own calls fail at once (AbleDBus throws `CancellationError` before sending
/// anything), so the clean-up must not run in it. The new task keeps the caller's priority.
package func runEvenIfCancelled<T: Sendable>(_ cleanUp: @escaping @Sendable () async -> T) async -> T {
    await Task.inheritingExecutor { await cleanUp() }.value
}
