import Dispatch

/// The serial executor of one D-Bus connection: a dispatch queue on which libdbus's watches,
/// timeouts and message dispatch run.
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
public final class DBusExecutor: SerialExecutor, @unchecked Sendable {
    let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
