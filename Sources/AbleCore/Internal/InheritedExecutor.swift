/// The task executor that the tasks Able starts on its own run on.
///
/// A task with an executor preference (SE-0417) keeps it in its child tasks, but not in the
/// unstructured tasks it starts. Able starts a few (a GATT server's event loop, clean-ups that
/// must outlive a cancellation, the operations a `FIFOLock` runs for synchronous callers), and a
/// simulated clock in automatic mode only sees work on its own executor. So code that runs on an
/// executor on purpose (`SimulatedClock.run(_:)`) names it here, and those tasks prefer it too.
package enum InheritedExecutor {
    /// The executor to prefer; `nil` (the default) prefers none, as `Task {}` does.
    @TaskLocal package static var preferred: (any TaskExecutor)?
}

extension Task where Failure == Never {
    /// Starts `operation` in a new unstructured task that prefers ``InheritedExecutor/preferred``.
    @discardableResult
    package static func inheritingExecutor(
        priority: TaskPriority? = nil, _ operation: sending @escaping () async -> Success
    ) -> Task<Success, Never> {
        Task(executorPreference: InheritedExecutor.preferred, priority: priority, operation: operation)
    }
}

extension Task where Failure == any Error {
    /// Starts `operation` in a new unstructured task that prefers ``InheritedExecutor/preferred``.
    @discardableResult
    package static func inheritingExecutor(
        priority: TaskPriority? = nil, _ operation: sending @escaping () async throws -> Success
    ) -> Task<Success, any Error> {
        Task(executorPreference: InheritedExecutor.preferred, priority: priority, operation: operation)
    }
}
