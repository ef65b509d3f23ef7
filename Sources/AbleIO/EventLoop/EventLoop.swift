import CLinux
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An event loop: one thread that waits in `epoll_pwait` on descriptors and timers, and runs jobs
/// in between. What D-Bus connections run on (`DBusExecutor` wraps one), and what Able's sockets
/// run on (a loop of their own, so that a flood on one never starves the other).
///
/// It is a serial executor and a task executor. A job enqueued from the loop's own thread runs on
/// the next turn without a wake-up; a job enqueued from another thread costs one `eventfd` write
/// when the loop sleeps. Jobs run in the order they were enqueued.
///
/// A loop's thread starts with its first client (a connection, a watched socket) or its first
/// job, and ends, once its jobs have run, when no client is left: a process with nothing open has
/// no loop thread. The `epoll` and `eventfd` descriptors live as long as the loop object.
///
/// - Important: Code on the loop must not block: while it runs, nothing bound to the loop reads,
///   writes or dispatches.
package final class EventLoop: SerialExecutor, TaskExecutor, @unchecked Sendable {
    /// What other threads hand to the loop, under the lock.
    private struct Inbox {
        var work: [Work] = []
        var threadRunning = false
        /// Connections, sockets and other registrations that keep the loop's thread alive.
        var clients = 0
    }

    /// A job, or a closure of the loop's users; either runs on the loop's thread only, which is
    /// what makes it sendable to the loop.
    private enum Work: @unchecked Sendable {
        case job(UnownedJob)
        case closure(() -> Void)
    }

    private let threadName: String
    private let inbox = Lock(Inbox())
    /// Whether the loop waits (or is about to wait) in `epoll_pwait` and must be woken: set when it
    /// decides to sleep, and cleared as soon as `epoll_pwait` returns (or by the submit that wakes
    /// it). In between, the loop's thread submits nothing, so work it submits itself never writes
    /// the `eventfd`.
    ///
    /// Taken (`exchange`) only under `inbox`'s lock, after the submit or release it belongs to has
    /// changed `hasWork` or `clientCount`. The loop sets it either under that lock, having seen
    /// the inbox empty, or without the lock (``mayWaitWithoutLock()``), before it reads those two
    /// again; all four accesses are sequentially consistent. Either way a submit adds its work
    /// before the loop looks, or finds the flag set and wakes the loop; so does the release of the
    /// last client. The loop clears it without the lock once awake, and a submit that meets the
    /// flag just before that clear only writes the `eventfd` once more, which costs the loop a
    /// turn.
    private let sleeping = Atomic<Bool>(false)
    /// Whether the inbox holds work: set and cleared under `inbox`'s lock, read by the loop
    /// without it, so that a turn that finds nothing to do (each paced event's) takes no lock.
    private let hasWork = Atomic<Bool>(false)
    /// `inbox.clients`, written under the lock with it, read by the loop without it.
    private let clientCount = Atomic<Int>(0)
    /// The loop thread's `pthread_t` while it runs, else 0.
    private let loopThread = Atomic<UInt>(0)
    private let epoll: Int32
    private let wakeDescriptor: Int32
    /// How many times ``wake()`` wrote the `eventfd` (for tests, through ``wakeCount``).
    private let wakeWrites = Atomic<Int>(0)

    // Touched only on the loop's thread, and never while another access to them is open (a
    // timer fires and a watch is retired outside them): so without the runtime's exclusivity
    // check, which every turn of the loop would otherwise pay several times.
    @exclusivity(unchecked) private var timers: [LoopTimer] = []
    @exclusivity(unchecked) private var retiredWatches: [LoopWatch] = []

    /// Creates an event loop whose thread bears `threadName` (what `/proc/self/task/*/comm` and
    /// debuggers show; 15 bytes at most).
    package init(threadName: String) {
        self.threadName = threadName
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeDescriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(epoll >= 0 && wakeDescriptor >= 0, "Able: no epoll or eventfd descriptor (errno \(errno))")
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: 0))
        precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, wakeDescriptor, &event) == 0, "Able: epoll_ctl failed")
    }

    deinit {
        close(epoll)
        close(wakeDescriptor)
    }

    // MARK: - Executor

    package func enqueue(_ job: consuming ExecutorJob) {
        submit(.job(UnownedJob(job)))
    }

    package func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    package func checkIsolated() {
        precondition(isOnLoop, "not on the \(threadName) event loop's thread")
    }

    /// Whether the caller runs on the loop's thread.
    package var isOnLoop: Bool {
        loopThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Runs `body` on the loop's thread, after the jobs enqueued before it.
    package func execute(_ body: @escaping () -> Void) {
        submit(.closure(body))
    }

    private func submit(_ work: Work) {
        let (sleeper, start) = inbox.withLock { inbox in
            inbox.work.append(work)
            hasWork.store(true, ordering: .sequentiallyConsistent)
            // The loop is held until its `eventfd` is written. A job comes with the executor
            // unretained, and once the lock is released the loop's thread may wake for another
            // reason, run this work, find no client and end, releasing what may be the loop's
            // last reference before this thread writes. The loop's thread holds a reference
            // until it ends, which it does only under this lock, so retaining it here is safe.
            let sleeper =
                sleeping.exchange(false, ordering: .sequentiallyConsistent) ? Unmanaged.passRetained(self) : nil
            let start = !inbox.threadRunning
            inbox.threadRunning = true
            return (sleeper, start)
        }
        if let sleeper {
            wake()
            sleeper.release()
        }
        if start { startThread() }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, 8)
        wakeWrites.add(1, ordering: .relaxed)
    }

    /// How many times the loop's `eventfd` has been written to wake it so far.
    package var wakeCount: Int { wakeWrites.load(ordering: .relaxed) }

    // MARK: - Clients

    /// Keeps the loop's thread alive, starting it if needed, until a matching
    /// ``releaseClient()``: a connection from its start to its teardown, a socket while it is
    /// watched.
    package func retainClient() {
        let start = inbox.withLock { inbox in
            inbox.clients += 1
            clientCount.store(inbox.clients, ordering: .sequentiallyConsistent)
            let start = !inbox.threadRunning
            inbox.threadRunning = true
            return start
        }
        if start { startThread() }
    }

    /// Lets the loop's thread end once no client is left and every job has run.
    package func releaseClient() {
        let wake = inbox.withLock { inbox in
            inbox.clients -= 1
            clientCount.store(inbox.clients, ordering: .sequentiallyConsistent)
            return inbox.clients == 0 && sleeping.exchange(false, ordering: .sequentiallyConsistent)
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
                let loop = Unmanaged<EventLoop>.fromOpaque(context!).takeRetainedValue()
                loop.run()
                return nil
            }, context)
        precondition(created == 0, "Able: could not start the event loop's thread (error \(created))")
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
            let next: Next
            if mayWaitWithoutLock() {
                next = .sleep
            } else {
                next = inbox.withLock { inbox in
                    if !inbox.work.isEmpty {
                        swap(&batch, &inbox.work)
                        hasWork.store(false, ordering: .sequentiallyConsistent)
                        return .runJobs
                    }
                    if inbox.clients == 0 {
                        // Under the lock: a thread started by the next submit stores its own.
                        loopThread.store(0, ordering: .relaxed)
                        inbox.threadRunning = false
                        return .exit
                    }
                    sleeping.store(true, ordering: .sequentiallyConsistent)
                    return .sleep
                }
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
            let count = able_epoll_pwait(epoll, events, Self.eventCapacity, timeout)
            // Awake: work submitted from now on is seen at the top of the loop, before it sleeps
            // again, and needs no `eventfd` write. Without this, every job that the handlers
            // below enqueue (a consumer's task that prefers this loop, a reply resuming a call
            // made on it) would write the `eventfd` and cost the loop an extra turn.
            if next == .sleep { sleeping.store(false, ordering: .relaxed) }
            if count > 0 { handle(events, count: Int(count)) }
            fireTimers()
            if !retiredWatches.isEmpty { retiredWatches.removeAll(keepingCapacity: true) }
        }
    }

    /// Decides, without the inbox's lock, that the loop may wait: when the inbox looks empty and
    /// clients remain, it sets `sleeping`, then looks again; if either changed meanwhile, it
    /// clears the flag and leaves the decision to the lock (a submit that took the flag in
    /// between wakes the loop once more than needed). See `sleeping` for why nothing is missed.
    /// The loop's thread ends only under the lock, as before.
    @inline(__always)
    private func mayWaitWithoutLock() -> Bool {
        guard !hasWork.load(ordering: .relaxed), clientCount.load(ordering: .relaxed) > 0 else { return false }
        sleeping.store(true, ordering: .sequentiallyConsistent)
        guard !hasWork.load(ordering: .sequentiallyConsistent), clientCount.load(ordering: .sequentiallyConsistent) > 0
        else {
            sleeping.store(false, ordering: .relaxed)
            return false
        }
        return true
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
            // Alive: a watch removed by an earlier event of this batch is retired until the end
            // of the turn, a socket holds itself until its cancellation has run on the loop.
            // (Guaranteed rather than retained for the call: one retain and release less per event.)
            Unmanaged<LoopEventTarget>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(data))!)
                ._withUnsafeGuaranteedRef { $0.handle(event.events) }
        }
    }

    /// `epoll_ctl(2)` on the loop's `epoll` descriptor, from any thread, for `target`.
    fileprivate func control(_ operation: Int32, _ descriptor: Int32, events: UInt32, target: LoopEventTarget) -> Bool {
        var event = epoll_event(
            events: events,
            data: epoll_data_t(u64: UInt64(UInt(bitPattern: Unmanaged.passUnretained(target).toOpaque()))))
        return epoll_ctl(epoll, operation, descriptor, &event) == 0
    }

    // MARK: - Descriptors of others

    /// Calls `handler` on the loop's thread whenever `descriptor` is readable, until the
    /// returned function is called (from any thread); the loop's thread stays alive meanwhile.
    /// The descriptor stays the caller's: close it only after calling that function.
    ///
    /// What `Scripts/bench`'s event-floor line measures one readiness event through.
    package func watchReadable(
        _ descriptor: Int32, handler: @escaping @Sendable () -> Void
    ) -> @Sendable () -> Void {
        let socket = LoopSocket(descriptor: descriptor, loop: self)
        socket.start(interest: .read, readable: handler, writable: {})
        return { socket.cancel {} }
    }

    // MARK: - Watches (on the loop's thread)

    /// Starts delivering `watch`'s events, or stops them.
    package func setEnabled(_ watch: LoopWatch, _ enabled: Bool) {
        guard !watch.isRemoved, enabled != watch.isRegistered else { return }
        if enabled {
            guard control(EPOLL_CTL_ADD, watch.descriptor, events: watch.events, target: watch) else { return }
        } else {
            epoll_ctl(epoll, EPOLL_CTL_DEL, watch.descriptor, nil)
        }
        watch.isRegistered = enabled
    }

    /// Stops `watch` for good and closes its duplicate descriptor at once (the peer must see a
    /// closed socket as soon as its owner closes it); the object itself lives until the end of the
    /// turn, for events of this turn that still name it.
    package func remove(_ watch: LoopWatch) {
        setEnabled(watch, false)
        watch.isRemoved = true
        watch.closeDescriptor()
        retiredWatches.append(watch)
    }

    // MARK: - Timers (on the loop's thread)

    package func add(_ timer: LoopTimer) {
        timers.append(timer)
    }

    package func remove(_ timer: LoopTimer) {
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

/// Whatever an `epoll` event of the loop names: a ``LoopWatch`` or a ``LoopSocket``.
package class LoopEventTarget {
    /// Called on the loop's thread with the `epoll` events that came.
    func handle(_ events: UInt32) {}
}

/// A descriptor the loop watches for one kind of readiness; on the loop's thread only.
///
/// It watches a duplicate of the descriptor it is given, so that two watches (libdbus has one for
/// reading and one for writing the same socket) are two registrations with `epoll`, and so that
/// a descriptor closed and reused by its owner never meets a stale registration.
package final class LoopWatch: LoopEventTarget {
    private(set) var descriptor: Int32
    /// `EPOLLIN` or `EPOLLOUT`.
    let events: UInt32
    /// Called with the `epoll` events that came.
    private let onEvents: (UInt32) -> Void
    var isRegistered = false
    var isRemoved = false

    package init?(descriptor: Int32, writable: Bool, onEvents: @escaping (UInt32) -> Void) {
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { return nil }
        self.descriptor = duplicate
        events = writable ? EPOLLOUT.rawValue : EPOLLIN.rawValue
        self.onEvents = onEvents
    }

    override func handle(_ events: UInt32) {
        // A watch removed by an earlier event of this batch is retired, not freed: skip it.
        guard isRegistered else { return }
        onEvents(events)
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

/// A socket that an ``EventLoop`` watches for reading, writing or both, whose interest may
/// change from any thread: what a dispatch read source and write source on one socket were, with
/// one `epoll` registration and no thread but the loop's.
///
/// It registers the descriptor itself (not a duplicate), so its owner closes the descriptor only
/// once ``cancel(then:)`` has run its closure, when the loop no longer watches it.
///
/// It is level-triggered: while the socket stays readable (or writable) and that interest is on,
/// the handler runs again on the loop's next turn, so a handler may stop early (a batch done, a
/// buffer full) and be called again. An interest that is off is left out of `epoll` altogether:
/// a socket that hung up does not wake the loop while nobody wants its events. A hang-up or
/// error goes to the handlers whose interest is on, which meet it in `recv(2)` or `send(2)`.
///
/// While it is started and not cancelled, it holds itself, its handlers and whatever they hold
/// (its owner), and keeps the loop's thread alive.
package final class LoopSocket: LoopEventTarget, @unchecked Sendable {
    /// Which readiness the handlers want.
    package struct Interest: OptionSet, Sendable {
        package let rawValue: UInt32
        package init(rawValue: UInt32) { self.rawValue = rawValue }
        package static let read = Interest(rawValue: 1)
        package static let write = Interest(rawValue: 2)
    }

    private struct State {
        var interest: Interest = []
        var isStarted = false
        var isCancelled = false
    }

    package let descriptor: Int32
    private let loop: EventLoop
    /// `epoll_ctl` calls and the state they follow happen under this lock, so that interest
    /// changes from several threads reach `epoll` in the order they were made.
    private let state = Lock(State())
    /// The interest (bits 0 and 1) and whether cancelled (bit 2), for the loop to read per event
    /// without the lock; stored with release after the handlers are set.
    private let flags = Atomic<UInt32>(0)
    private static let cancelledFlag: UInt32 = 4

    /// The handlers, in an object of their own that the loop reaches without retaining it or a
    /// closure per event: set in `start` before the socket is registered (balanced by a retain),
    /// let go of on the loop once cancelled, after any handler already running.
    private final class Handlers {
        let readable: () -> Void
        let writable: () -> Void

        init(readable: @escaping () -> Void, writable: @escaping () -> Void) {
            self.readable = readable
            self.writable = writable
        }
    }

    private var handlers: Unmanaged<Handlers>?

    /// A socket to watch on `loop`, once started.
    package init(descriptor: Int32, loop: EventLoop) {
        self.descriptor = descriptor
        self.loop = loop
    }

    deinit {
        handlers?.release()
    }

    /// Starts watching, with the handlers to call on the loop's thread.
    ///
    /// - Parameters:
    ///   - interest: What to watch for at first.
    ///   - readable: Called while the socket is readable (or hung up) and `.read` is on.
    ///   - writable: Called while the socket is writable (or hung up) and `.write` is on.
    package func start(interest: Interest, readable: @escaping () -> Void, writable: @escaping () -> Void) {
        handlers?.release()
        handlers = Unmanaged.passRetained(Handlers(readable: readable, writable: writable))
        let started = state.withLock { state -> Bool in
            guard !state.isStarted, !state.isCancelled else { return false }
            state.isStarted = true
            return true
        }
        guard started else { return }
        _ = Unmanaged.passRetained(self)
        loop.retainClient()
        setInterest(interest)
    }

    /// Turns `interest` on or off, from any thread; the loop sees it on its next wait.
    package func set(_ interest: Interest, _ on: Bool) {
        state.withLock { state in
            update(&state, to: on ? state.interest.union(interest) : state.interest.subtracting(interest))
        }
    }

    private func setInterest(_ interest: Interest) {
        state.withLock { state in update(&state, to: interest) }
    }

    private func update(_ state: inout State, to interest: Interest) {
        guard state.isStarted, !state.isCancelled, interest != state.interest else {
            // Before `start`, remember what it will begin with.
            if !state.isStarted, !state.isCancelled { state.interest = interest }
            return
        }
        let operation = state.interest.isEmpty ? EPOLL_CTL_ADD : interest.isEmpty ? EPOLL_CTL_DEL : EPOLL_CTL_MOD
        var events: UInt32 = 0
        if interest.contains(.read) { events |= EPOLLIN.rawValue }
        if interest.contains(.write) { events |= EPOLLOUT.rawValue }
        state.interest = interest
        flags.store(interest.rawValue, ordering: .releasing)
        guard loop.control(operation, descriptor, events: events, target: self) || interest.isEmpty else {
            // `epoll` refused the socket (it was closed under us, or is not pollable): let the
            // handlers meet the error in their own calls rather than wait forever.
            loop.execute { [self] in handle(EPOLLERR.rawValue) }
            return
        }
    }

    /// Stops watching for good, from any thread, then runs `body` on the loop's thread, after any
    /// handler already running; from then on the owner may close the descriptor. Only the first
    /// call counts.
    package func cancel(then body: @escaping () -> Void) {
        let wasStarted = state.withLock { state -> Bool? in
            guard !state.isCancelled else { return nil }
            state.isCancelled = true
            if !state.interest.isEmpty { _ = loop.control(EPOLL_CTL_DEL, descriptor, events: 0, target: self) }
            state.interest = []
            flags.store(Self.cancelledFlag, ordering: .releasing)
            return state.isStarted
        }
        guard let wasStarted else { return }
        loop.execute { [self] in
            handlers?.release()
            handlers = nil
            body()
            guard wasStarted else { return }
            loop.releaseClient()
            Unmanaged.passUnretained(self).release()
        }
    }

    override func handle(_ events: UInt32) {
        let failed = events & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0
        var flags = self.flags.load(ordering: .acquiring)
        if flags & Self.cancelledFlag == 0, flags & Interest.read.rawValue != 0,
            failed || events & EPOLLIN.rawValue != 0
        {
            handlers?._withUnsafeGuaranteedRef { $0.readable() }
            flags = self.flags.load(ordering: .acquiring)
        }
        if flags & Self.cancelledFlag == 0, flags & Interest.write.rawValue != 0,
            failed || events & EPOLLOUT.rawValue != 0
        {
            handlers?._withUnsafeGuaranteedRef { $0.writable() }
        }
    }
}

/// A deadline on the loop's monotonic clock and what to do when it passes; on the loop's thread only.
package final class LoopTimer {
    /// When to fire, in `CLOCK_MONOTONIC` nanoseconds; `nil` when disarmed. Firing disarms it.
    /// Without the runtime's exclusivity check: it is read and written on the loop's thread only,
    /// in single statements, and the loop reads every timer's at every turn.
    @exclusivity(unchecked) package var deadline: UInt64?
    let fire: () -> Void

    package init(fire: @escaping () -> Void) {
        self.fire = fire
    }

    package static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
