import AbleStreams
import CDBus
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An event loop that D-Bus connections run on: one thread that waits in `epoll_wait` on the
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
/// }
/// ```
///
/// - Important: Code on the loop must not block: while it runs, no connection bound to the loop
///   reads, writes or dispatches.
public final class DBusExecutor: SerialExecutor, TaskExecutor, @unchecked Sendable {
    /// The loop that connections use unless they are given another.
    public static let shared = DBusExecutor(threadName: "able.dbus")

    /// What other threads hand to the loop, under the lock.
    private struct Inbox {
        var work: [Work] = []
        /// Whether the loop waits (or is about to wait) in `epoll_wait` and must be woken.
        var sleeping = false
        var threadRunning = false
        /// Connections (and other registrations) that keep the loop's thread alive.
        var clients = 0
    }

    /// A job, or a closure of the connections' own code; either runs on the loop's thread only,
    /// which is what makes it sendable to the loop.
    enum Work: @unchecked Sendable {
        case job(UnownedJob)
        case closure(() -> Void)
    }

    private let threadName: String
    private let inbox = Lock(Inbox())
    /// The loop thread's `pthread_t` while it runs, else 0.
    private let loopThread = Atomic<UInt>(0)
    private let epoll: Int32
    private let wakeDescriptor: Int32

    // Touched only on the loop's thread.
    private var timers: [LoopTimer] = []
    private var retiredWatches: [LoopWatch] = []

    /// Creates an event loop of its own, for connections that should not share ``shared``.
    public convenience init() {
        self.init(threadName: "able.dbus.own")
    }

    /// Creates an event loop whose thread bears `threadName` (what `/proc/self/task/*/comm` and
    /// debuggers show; 15 bytes at most).
    package init(threadName: String) {
        self.threadName = threadName
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeDescriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(epoll >= 0 && wakeDescriptor >= 0, "AbleDBus: no epoll or eventfd descriptor (errno \(errno))")
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: 0))
        precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, wakeDescriptor, &event) == 0, "AbleDBus: epoll_ctl failed")
    }

    deinit {
        close(epoll)
        close(wakeDescriptor)
    }

    // MARK: - Executor

    public func enqueue(_ job: consuming ExecutorJob) {
        submit(.job(UnownedJob(job)))
    }

    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func checkIsolated() {
        precondition(isOnLoop, "not on the D-Bus event loop's thread")
    }

    /// Whether the caller runs on the loop's thread.
    package var isOnLoop: Bool {
        loopThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Runs `body` on the loop's thread, after the jobs enqueued before it.
    func execute(_ body: @escaping () -> Void) {
        submit(.closure(body))
    }

    private func submit(_ work: Work) {
        let (wake, start) = inbox.withLock { inbox in
            inbox.work.append(work)
            let wake = inbox.sleeping
            inbox.sleeping = false
            let start = !inbox.threadRunning
            inbox.threadRunning = true
            return (wake, start)
        }
        if wake { self.wake() }
        if start { startThread() }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, 8)
    }

    // MARK: - Clients

    /// Keeps the loop's thread alive until a matching ``releaseClient()``: a connection from its
    /// start to its teardown.
    func retainClient() {
        inbox.withLock { $0.clients += 1 }
    }

    /// Lets the loop's thread end once no client is left and every job has run.
    func releaseClient() {
        let wake = inbox.withLock { inbox in
            inbox.clients -= 1
            guard inbox.clients == 0, inbox.sleeping else { return false }
            inbox.sleeping = false
            return true
        }
        if wake { self.wake() }
    }

    // MARK: - The thread

    private func startThread() {
        let context = Unmanaged.passRetained(self).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        defer { pthread_attr_destroy(&attributes) }
        var thread = pthread_t()
        let created = pthread_create(
            &thread, &attributes,
            { context in
                let loop = Unmanaged<DBusExecutor>.fromOpaque(context!).takeRetainedValue()
                loop.run()
                return nil
            }, context)
        precondition(created == 0, "AbleDBus: could not start the event loop's thread (error \(created))")
    }

    /// How many turns may run jobs before the loop looks at its descriptors and timers again.
    private static let jobTurnsBetweenPolls = 16
    private static let eventCapacity: Int32 = 64

    private func run() {
        loopThread.store(UInt(pthread_self()), ordering: .relaxed)
        _ = able_name_this_thread(threadName)
        let serial = asUnownedSerialExecutor()
        let task = asUnownedTaskExecutor()
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: Int(Self.eventCapacity))
        defer { events.deallocate() }
        var batch: [Work] = []
        var jobTurns = 0
        while true {
            enum Next { case runJobs, sleep, exit }
            let next: Next = inbox.withLock { inbox in
                if !inbox.work.isEmpty {
                    swap(&batch, &inbox.work)
                    return .runJobs
                }
                if inbox.clients == 0 {
                    // Under the lock: a thread started by the next submit stores its own.
                    loopThread.store(0, ordering: .relaxed)
                    inbox.threadRunning = false
                    return .exit
                }
                inbox.sleeping = true
                return .sleep
            }
            let timeout: Int32
            switch next {
            case .exit:
                return
            case .runJobs:
                for work in batch {
                    switch work {
                    case .job(let job): job.runSynchronously(isolatedTo: serial, taskExecutor: task)
                    case .closure(let body): body()
                    }
                }
                batch.removeAll(keepingCapacity: true)
                jobTurns += 1
                guard jobTurns >= Self.jobTurnsBetweenPolls else { continue }
                timeout = 0
            case .sleep:
                timeout = nextTimeout()
            }
            jobTurns = 0
            let count = epoll_wait(epoll, events, Self.eventCapacity, timeout)
            if count > 0 { handle(events, count: Int(count)) }
            fireTimers()
            retiredWatches.removeAll(keepingCapacity: true)
        }
    }

    private func handle(_ events: UnsafeMutablePointer<epoll_event>, count: Int) {
        for index in 0..<count {
            let event = events[index]
            let data = event.data.u64
            if data == 0 {
                var value: UInt64 = 0
                _ = read(wakeDescriptor, &value, 8)
                continue
            }
            let watch = Unmanaged<LoopWatch>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(data))!)
                .takeUnretainedValue()
            // A watch removed by an earlier event of this batch is retired, not freed: skip it.
            guard watch.isRegistered else { continue }
            watch.handle(event.events)
        }
    }

    // MARK: - Descriptors of others

    /// Calls `handler` on the loop's thread whenever `descriptor` is readable, until the
    /// returned function is called (from any thread); the loop's thread stays alive meanwhile.
    ///
    /// What `Scripts/bench`'s event-floor line measures one readiness event through.
    package func watchReadable(
        _ descriptor: Int32, handler: @escaping @Sendable () -> Void
    ) -> @Sendable () -> Void {
        final class Box: @unchecked Sendable {
            var watch: LoopWatch?
        }
        let box = Box()
        retainClient()
        execute { [self] in
            box.watch = LoopWatch(descriptor: descriptor, writable: false) { _ in handler() }
            if let watch = box.watch { setEnabled(watch, true) }
        }
        return { [self] in
            execute { [self] in
                if let watch = box.watch { remove(watch) }
                box.watch = nil
                releaseClient()
            }
        }
    }

    // MARK: - Watches (on the loop's thread)

    /// Starts delivering `watch`'s events, or stops them.
    func setEnabled(_ watch: LoopWatch, _ enabled: Bool) {
        guard !watch.isRemoved, enabled != watch.isRegistered else { return }
        if enabled {
            var event = epoll_event(
                events: watch.events,
                data: epoll_data_t(u64: UInt64(UInt(bitPattern: Unmanaged.passUnretained(watch).toOpaque()))))
            guard epoll_ctl(epoll, EPOLL_CTL_ADD, watch.descriptor, &event) == 0 else { return }
        } else {
            epoll_ctl(epoll, EPOLL_CTL_DEL, watch.descriptor, nil)
        }
        watch.isRegistered = enabled
    }

    /// Stops `watch` for good and closes its duplicate descriptor at once (the peer must see a
    /// closed socket as soon as its owner closes it); the object itself lives until the end of the
    /// turn, for events of this turn that still name it.
    func remove(_ watch: LoopWatch) {
        setEnabled(watch, false)
        watch.isRemoved = true
        watch.closeDescriptor()
        retiredWatches.append(watch)
    }

    // MARK: - Timers (on the loop's thread)

    func add(_ timer: LoopTimer) {
        timers.append(timer)
    }

    func remove(_ timer: LoopTimer) {
        timers.removeAll { $0 === timer }
    }

    private func nextTimeout() -> Int32 {
        var earliest = UInt64.max
        for timer in timers {
            if let deadline = timer.deadline, deadline < earliest { earliest = deadline }
        }
        guard earliest != .max else { return -1 }
        let now = LoopTimer.now()
        guard earliest > now else { return 0 }
        // Rounded up: waking before the deadline would only wake again.
        return Int32(clamping: (earliest - now + 999_999) / 1_000_000)
    }

    private func fireTimers() {
        guard !timers.isEmpty else { return }
        let now = LoopTimer.now()
        for timer in timers {
            guard let deadline = timer.deadline, deadline <= now else { continue }
            timer.deadline = nil
            timer.fire()
        }
    }
}

/// A descriptor the loop watches for one kind of readiness; on the loop's thread only.
///
/// It watches a duplicate of the descriptor it is given, so that two watches (libdbus has one for
/// reading and one for writing the same socket) are two registrations with `epoll`, and so that
/// a descriptor closed and reused by its owner never meets a stale registration.
final class LoopWatch {
    private(set) var descriptor: Int32
    /// `EPOLLIN` or `EPOLLOUT`.
    let events: UInt32
    /// Called with the `epoll` events that came.
    let handle: (UInt32) -> Void
    var isRegistered = false
    var isRemoved = false

    init?(descriptor: Int32, writable: Bool, handle: @escaping (UInt32) -> Void) {
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { return nil }
        self.descriptor = duplicate
        events = writable ? EPOLLOUT.rawValue : EPOLLIN.rawValue
        self.handle = handle
    }

    func closeDescriptor() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit {
        closeDescriptor()
    }
}

/// A deadline on the loop's monotonic clock and what to do when it passes; on the loop's thread only.
final class LoopTimer {
    /// When to fire, in `CLOCK_MONOTONIC` nanoseconds; `nil` when disarmed. Firing disarms it.
    var deadline: UInt64?
    let fire: () -> Void

    init(fire: @escaping () -> Void) {
        self.fire = fire
    }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
