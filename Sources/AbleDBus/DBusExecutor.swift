package import AbleIO

/// An event loop that D-Bus connections run on: one thread that waits in `epoll_pwait` on the
/// connections' sockets and timeouts, and runs jobs in between.
///
/// It is the serial executor of every ``DBusConnection`` bound to it, and a task executor. A job
/// enqueued from the loop's own thread (a reply resuming a call made on the loop, a handler's
/// answer) runs on the next turn without a wake-up; a job enqueued from another thread costs one
/// `eventfd` write when the loop sleeps. Jobs run in the order they were enqueued.
///
/// By default every connection of the process shares ``shared``; a connection given its own
/// executor (`DBusExecutor()`) gets a loop of its own. A loop's thread starts with the first
/// connection bound to it and ends, once its jobs have run, when the last one is torn down: a
/// process with no open connection has no loop thread.
///
/// Actors that talk to the bus a lot can share the executor, so that their calls are sent, and
/// their replies resume them, without leaving the loop's thread:
///
/// ```swift
/// actor Device {
///     let connection: DBusConnection
///     nonisolated var unownedExecutor: UnownedSerialExecutor { connection.executor.asUnownedSerialExecutor() }
///
///     init(connection: DBusConnection) { self.connection = connection }
/// }
/// ```
///
/// - Important: Code on the loop must not block: while it runs, no connection bound to the loop
///   reads, writes or dispatches.
public final class DBusExecutor: SerialExecutor, TaskExecutor, @unchecked Sendable {
    /// The loop that connections use unless they are given another.
    public static let shared = DBusExecutor(threadName: "able.dbus")

    /// The loop itself: jobs of actors bound to this executor run on it, isolated to it.
    package let loop: EventLoop

    /// Creates an event loop of its own, for connections that should not share ``shared``.
    public convenience init() {
        self.init(threadName: "able.dbus.own")
    }

    /// Creates an event loop whose thread bears `threadName` (what `/proc/self/task/*/comm` and
    /// debuggers show; 15 bytes at most).
    package init(threadName: String) {
        loop = EventLoop(threadName: threadName)
    }

    // The executor's identity is the loop's, so that the runtime hands jobs straight to it.

    public func enqueue(_ job: consuming ExecutorJob) {
        loop.enqueue(job)
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        loop.asUnownedTaskExecutor()
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        loop.asUnownedSerialExecutor()
    }

    public func checkIsolated() {
        loop.checkIsolated()
    }

    /// Whether the caller runs on the loop's thread.
    package var isOnLoop: Bool { loop.isOnLoop }

    /// Runs `body` on the loop's thread, after the jobs enqueued before it.
    func execute(_ body: @escaping () -> Void) {
        loop.execute(body)
    }

    /// Calls `handler` on the loop's thread whenever `descriptor` is readable, until the
    /// returned function is called; see ``EventLoop/watchReadable(_:handler:)``.
    package func watchReadable(
        _ descriptor: Int32, handler: @escaping @Sendable () -> Void
    ) -> @Sendable () -> Void {
        loop.watchReadable(descriptor, handler: handler)
    }
}
