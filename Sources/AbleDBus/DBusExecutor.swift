import Dispatch

/// The serial executor of one D-Bus connection: a dispatch queue on which libdbus's watches,
/// timeouts and message dispatch run.
///
/// It is also a task executor: nonisolated code can prefer it with
/// `withTaskExecutorPreference(connection.executor) { … }`, so that replies and signals resume
/// the waiting task on the connection's queue instead of going through the global pool.
///
/// Actors that talk to the bus a lot can share it, so that their calls and the connection's
/// replies need no hop between threads:
///
/// ```swift
/// actor Device {
///     let connection: DBusConnection
///     nonisolated var unownedExecutor: UnownedSerialExecutor { connection.executor.asUnownedSerialExecutor() }
/// }
/// ```
public final class DBusExecutor: SerialExecutor, TaskExecutor, @unchecked Sendable {
    let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let serial = asUnownedSerialExecutor()
        let task = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(isolatedTo: serial, taskExecutor: task) }
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
