import AbleCore
import AbleIO

/// The clock of a ``SimulatedRadio``: virtual time that the test controls, on which every
/// simulated delay and every timeout of the radio's adapters runs.
///
/// Nothing waits in real time. Advertising intervals, connection and service-resolution times,
/// delayed notifications, and the timeouts of ``/Able/Peripheral/connect(timeout:)`` and
/// ``/Able/ScanStream/first(timeout:)`` on the radio's adapters are deadlines on this clock; the
/// code under test can sleep on it too (`try await radio.clock.sleep(for: .seconds(1))`).
///
/// **Automatic mode** (the default): time jumps to the next deadline as soon as everything is
/// waiting. How the clock knows that depends on where the code under test runs.
///
/// - **Inside ``run(isolation:_:)``** (or ``SimulatedRadio/run(isolation:_:)``), time is exact. The body runs on the
///   clock's ``executor``, which runs the simulation one job at a time; its child tasks, the
///   actors it calls and the tasks Able starts for it run there too. When the executor has
///   nothing left to run, no sleeper woken off the executor is still on its way, and no scan or
///   notification stream of the radio has woken a consumer that has not come for its value, the
///   earliest deadline fires; sleepers with the same deadline wake in the order they went to
///   sleep. This never depends on real time or on how threads are scheduled: a loaded machine or
///   a sanitizer runs the same simulation, only slower, and a body may compute for as long as it
///   likes between two steps without a timeout overtaking it.
/// - **Outside ``run(isolation:_:)``** (while no ``run(isolation:_:)`` of this clock is under way), the clock cannot
///   see the code under test, so it guesses: it fires the earliest deadline after a quiet
///   spell, a number of yields of the cooperative thread pool in a row in which the radio saw
///   no activity (no GATT operation, connection, new sleeper or deadline) and, after a GATT
///   operation, a connection or a task going to sleep on the clock, at least 100 ms of real
///   time; the spell is extended a bounded number of times while a woken sleeper has not run
///   yet or a stream holds a value for its consumer. Code that goes from one radio call to the
///   next without computing for long works as it did before ``run(isolation:_:)`` existed, and better on a
///   loaded machine; code that computes (or is held up) between two steps for longer than the
///   spell may see a timeout fire early, and each such deadline costs up to 100 ms of real
///   time. Wrap tests in ``run(isolation:_:)`` for exact time at full speed.
///
/// In both, work the clock does not see is not waited for: tasks started with `Task {}` inside
/// ``run(isolation:_:)`` (start them with `Task(executorPreference: radio.clock.executor)`), and anything
/// waiting outside the clock and the radio (a file, a real socket, a `DispatchQueue`; data on a
/// simulated L2CAP channel moves through a real socket pair). Tests of such code use
/// **manual mode**, in which time moves only when the test calls ``advance(by:)`` or
/// ``advance(to:)``.
///
/// ```swift
/// let radio = SimulatedRadio(clock: SimulatedClock(mode: .manual))
/// let connecting = Task { try await peripheral.connect(timeout: .seconds(5)) }
/// await radio.clock.advance(by: .seconds(5))    // the connection times out now
/// ```
public final class SimulatedClock: Clock, Sendable {
    /// A moment on a simulated clock: the time since the clock started.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// The time since the clock started.
        public var offset: Duration

        /// The instant `offset` after the clock started.
        public init(offset: Duration) { self.offset = offset }

        /// The instant `duration` after this one.
        /// The instant `duration` after this one.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// The time from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "\(offset)" }
    }

    /// How the clock moves.
    public enum Mode: Sendable, Hashable {
        /// Time jumps to the next deadline as soon as everything is waiting.
        case automatic
        /// Time moves only when the test advances it.
        case manual
    }

    private enum Wakeup {
        case continuation(UnsafeContinuation<Void, any Error>)
        case action(@Sendable () -> Void)
    }

    private struct Sleeper {
        var deadline: Instant
        var wakeup: Wakeup
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [UInt64: Sleeper] = [:]
        var nextID: UInt64 = 0
        /// Sleepers resumed whose tasks have not run yet: time waits for them.
        var waking: Set<UInt64> = []
        /// Say whether a value was handed to a consumer that has not taken it yet (such as a
        /// discovery a scan stream woke its consumer for): time waits while one says so.
        var handOffChecks: [@Sendable () -> Bool] = []
        /// Say whether work moves where neither the executor nor a hand-off reports its end (values
        /// in flight through the simulated sockets): time waits while one says so, looking again
        /// every millisecond.
        var unseenWorkChecks: [@Sendable () -> Bool] = []
        /// Calls of ``advance(to:)`` waiting for what a deadline woke to be done.
        var settling: [UnsafeContinuation<Void, Never>] = []
        /// How many ``run(isolation:_:)`` bodies are under way: while there is one, time is exact.
        var runScopes = 0
        /// Outside ``run(isolation:_:)``: changes whenever the radio does something, which starts a new
        /// quiet spell.
        var generation: UInt64 = 0
        /// Outside ``run(isolation:_:)``: whether the task that waits for quiet spells runs.
        var isDriving = false
        /// Outside ``run(isolation:_:)``: when the code under test last asked the radio for something (a
        /// GATT operation, a connection) or went to sleep on the clock, in real time.
        var lastRequest: ContinuousClock.Instant?

        /// Moves time to `deadline` and takes everything due then, in the order it was
        /// scheduled; sleepers taken are waking until their tasks run.
        mutating func takeDue(at deadline: Instant) -> [Wakeup] {
            if deadline > now { now = deadline }
            generation &+= 1
            let ids = sleepers.filter { $0.value.deadline <= deadline }.keys.sorted()
            return ids.compactMap { id -> Wakeup? in
                guard let wakeup = sleepers.removeValue(forKey: id)?.wakeup else { return nil }
                if case .continuation = wakeup { waking.insert(id) }
                return wakeup
            }
        }
    }

    /// Outside ``run(isolation:_:)``: how many yields in a row without activity make a quiet spell.
    static let quietYields = 48
    /// Outside ``run(isolation:_:)``: how many more spells a quiet spell waits for while a sleeper it woke
    /// has not run yet or a stream holds a value for its consumer.
    static let busySpells = 64
    /// Outside ``run(isolation:_:)``: how long in real time a quiet spell lasts at least after the code under
    /// test last asked the radio for something, went to sleep or woke up. Code that goes from one step to
    /// the next is invisible between them; on a loaded machine a thread can wait for a CPU for
    /// tens of milliseconds (20 ms was too little for 50 reads under ThreadSanitizer with both
    /// cores busy), far longer than a spell of yields on another thread. Deadlines the radio
    /// schedules for itself (advertising intervals, delayed notifications) do not pay it.
    static let quietTimeAfterRequest = Duration.milliseconds(100)

    private let state = Lock(State())

    /// The executor the simulation runs on: in automatic mode, time moves when it has nothing to
    /// run. Prefer it for tasks the code under test starts:
    /// `Task(executorPreference: clock.executor) { … }`.
    public var executor: any TaskExecutor { simulation }
    private let simulation = SimulatedExecutor()

    /// How the clock moves.
    public let mode: Mode

    /// A clock at zero.
    ///
    /// - Parameter mode: ``Mode/automatic`` (the default) or ``Mode/manual``.
    public init(mode: Mode = .automatic) {
        self.mode = mode
        simulation.setIdleHandler { [weak self] in self?.simulationIdle() }
    }

    /// Runs `body` on the clock's ``executor``, with every task Able starts for it preferring
    /// the executor too: the simulation then sees all of that work, and an automatic clock moves
    /// time only when all of it waits.
    ///
    /// While a body runs, time on this clock is exact (see ``SimulatedClock``); before and after,
    /// the clock goes back to guessing from quiet spells.
    ///
    /// Call it from code that is not isolated to an actor (such as a test function): isolated
    /// code runs on its actor's executor, not on the clock's.
    public func run<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        state.withLock { $0.runScopes += 1 }
        // Sleepers from before the body are the executor's to fire now.
        simulation.look()
        defer {
            let isLast = state.withLock { state -> Bool in
                state.runScopes -= 1
                return state.runScopes == 0
            }
            if isLast { deadlineAdded() }
        }
        return try await InheritedExecutor.$preferred.withValue(simulation) {
            try await withTaskExecutorPreference(simulation) { try await body() }
        }
    }

    /// The current simulated time.
    public var now: Instant { state.withLock { $0.now } }

    /// How many sleepers and scheduled simulated events wait for their deadline: in manual mode,
    /// a test can yield until the code under test is asleep before it advances time.
    public var pendingCount: Int { state.withLock { $0.sleepers.count } }

    /// One nanosecond: the clock never rounds.
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Waits until `deadline` in simulated time.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        defer {
            // A sleeper woken off the executor is on its way until here: time waited for it.
            // Its task's next steps are as invisible as those after a request, and on a loaded
            // machine they can take as long to show: outside `run`, they get the same real time.
            let wasWaking = state.withLock { state -> Bool in
                state.generation &+= 1
                guard state.waking.remove(id) != nil else { return false }
                state.lastRequest = .now
                return true
            }
            if wasWaking { simulation.look() }
        }
        let now = ContinuousClock.now
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Bool? in
                    // Cancellation sets the flag before `onCancel` takes the lock: a sleeper
                    // registered after that would never be woken.
                    guard !Task.isCancelled else { return nil }
                    guard deadline > state.now else { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline, wakeup: .continuation(continuation))
                    // A task that goes to sleep is a step of the code under test: outside `run`,
                    // its next steps (in other tasks) get a quiet spell's real time to show.
                    state.lastRequest = now
                    return false
                }
                switch resumeNow {
                case nil: continuation.resume(throwing: CancellationError())
                case true?: continuation.resume()
                case false?: deadlineAdded()
                }
            }
        } onCancel: {
            let removed = state.withLock { state in
                state.generation &+= 1
                return state.sleepers.removeValue(forKey: id)
            }
            if case .continuation(let continuation) = removed?.wakeup {
                continuation.resume(throwing: CancellationError())
            }
        }
    }

    /// Moves time forward by `duration`, waking every sleeper whose deadline passes, in
    /// deadline order; each group of sleepers with one deadline runs before time moves on.
    ///
    /// In automatic mode time also moves by itself; advancing by hand there is allowed.
    public func advance(by duration: Duration) async {
        await advance(to: now.advanced(by: duration))
    }

    /// Moves time forward to `instant` (never back), waking sleepers as ``advance(by:)`` does.
    public func advance(to instant: Instant) async {
        while let next = nextDeadline(notAfter: instant) {
            fire(at: next)
            await settle()
        }
        state.withLock { state in
            if instant > state.now { state.now = instant }
        }
    }

    // MARK: For the radio

    /// Runs `action` at `deadline` (at once if it has passed); returns a token for ``cancel(_:)``.
    @discardableResult
    func schedule(at deadline: Instant, _ action: @escaping @Sendable () -> Void) -> UInt64 {
        let id = state.withLock { state -> UInt64? in
            guard deadline > state.now else { return nil }
            state.nextID += 1
            state.sleepers[state.nextID] = Sleeper(deadline: deadline, wakeup: .action(action))
            return state.nextID
        }
        guard let id else {
            action()
            return 0
        }
        deadlineAdded()
        return id
    }

    /// Runs `action` after `delay`.
    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> UInt64 {
        schedule(at: now.advanced(by: delay), action)
    }

    /// Drops a scheduled action that has not run.
    func cancel(_ token: UInt64) {
        state.withLock { state in
            if case .action = state.sleepers[token]?.wakeup {
                state.sleepers[token] = nil
                state.generation &+= 1
            }
        }
    }

    /// Tells the clock that the radio did something (a GATT operation, a connection): outside
    /// ``run(isolation:_:)``, an automatic clock waits for a new quiet spell.
    func noteActivity() {
        let now = ContinuousClock.now
        state.withLock { state in
            state.generation &+= 1
            state.lastRequest = now
        }
    }

    /// Adds a check of values handed to consumers and not yet taken, which time waits for;
    /// whoever sees such a hand-off end calls ``handOffEnded()``.
    func addHandOffCheck(_ check: @escaping @Sendable () -> Bool) {
        state.withLock { $0.handOffChecks.append(check) }
    }

    /// Adds a check of work in flight whose end nothing reports to the clock, such as values
    /// moving through a simulated socket on dispatch sources: time waits while it says so, and
    /// looks again every millisecond of real time until it stops saying so.
    func addUnseenWorkCheck(_ check: @escaping @Sendable () -> Bool) {
        state.withLock { $0.unseenWorkChecks.append(check) }
    }

    /// A value handed to a consumer was taken: time may move again.
    func handOffEnded() {
        state.withLock { $0.generation &+= 1 }
        simulation.look()
    }

    // MARK: Moving time

    private func nextDeadline(notAfter limit: Instant?) -> Instant? {
        state.withLock { state in
            guard let earliest = state.sleepers.values.map(\.deadline).min() else { return nil }
            if let limit, earliest > limit { return nil }
            return earliest
        }
    }

    /// Moves time to `deadline` and wakes everything due then, in the order it was scheduled.
    private func fire(at deadline: Instant) {
        wake(state.withLock { $0.takeDue(at: deadline) })
    }

    /// Resumes what ``State/takeDue(at:)`` took, in order, outside the lock.
    private func wake(_ due: [Wakeup]) {
        for wakeup in due {
            switch wakeup {
            case .continuation(let continuation): continuation.resume()
            case .action(let action): action()
            }
        }
    }

    /// Waits until what the last deadline woke is done: inside ``run(isolation:_:)``, the executor idle and
    /// nothing on its way; outside, a quiet spell.
    private func settle() async {
        guard state.withLock({ $0.runScopes > 0 }) else {
            await quietSpell()
            return
        }
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            state.withLock { $0.settling.append(continuation) }
            simulation.look()
        }
    }

    /// A sleeper or an action was added: an automatic clock looks whether it is due.
    private func deadlineAdded() {
        guard mode == .automatic else { return }
        let isExact = state.withLock { state -> Bool in
            state.generation &+= 1
            return state.runScopes > 0
        }
        if isExact { simulation.look() } else { startDriving() }
    }

    // MARK: Outside run: quiet spells

    /// Lets every task that is ready run until the radio sees no activity for a quiet spell.
    ///
    /// A spell is extended, a bounded number of times, while a sleeper it woke has not run yet or
    /// a stream holds a value its consumer has not taken: so a timeout does not overtake what came
    /// before it in simulated time. The bound keeps a test that leaves values in a stream on
    /// purpose from stopping time.
    ///
    /// Returns the activity generation the spell ended quiet in: firing a deadline after it is
    /// still right only while the generation has not moved.
    @discardableResult
    private func quietSpell() async -> UInt64 {
        var quiet = 0
        var busySpells = 0
        var seen = state.withLock { $0.generation }
        while true {
            await Task.yield()
            let generation = state.withLock { $0.generation }
            if generation == seen {
                quiet += 1
            } else {
                seen = generation
                quiet = 0
            }
            guard quiet >= Self.quietYields else { continue }
            if let lastRequest = state.withLock({ $0.lastRequest }) {
                let since = lastRequest.duration(to: .now)
                if since < Self.quietTimeAfterRequest {
                    try? await Task.sleep(for: Self.quietTimeAfterRequest - since)
                    quiet = 0
                    continue
                }
            }
            let (checks, waking) = state.withLock { ($0.handOffChecks + $0.unseenWorkChecks, $0.waking) }
            guard busySpells < Self.busySpells, !waking.isEmpty || checks.contains(where: { $0() }) else { return seen }
            busySpells += 1
            quiet = 0
        }
    }

    /// Starts the task that fires deadlines after quiet spells, unless it runs or a ``run(isolation:_:)``
    /// body is under way. One task per busy period, not one per sleeper.
    private func startDriving() {
        let start = state.withLock { state -> Bool in
            guard !state.isDriving, state.runScopes == 0, !state.sleepers.isEmpty else { return false }
            state.isDriving = true
            return true
        }
        guard start else { return }
        Task.detached { [self] in await drive() }
    }

    private func drive() async {
        while true {
            let quietGeneration = await quietSpell()
            // A body that started meanwhile owns time from now: the executor fires deadlines.
            guard fireEarliest(exact: false, quietSince: quietGeneration) else { return }
        }
    }

    /// Fires the earliest deadline if the clock is in the given state (exact: a ``run(isolation:_:)`` body
    /// under way); else, outside ``run(isolation:_:)``, stops the driver. Returns whether the caller
    /// should go on: a deadline fired, or (outside ``run(isolation:_:)``) the radio saw activity after
    /// the quiet spell in `quietSince` ended, so the spell no longer counts and another is needed.
    private func fireEarliest(exact: Bool, quietSince: UInt64? = nil) -> Bool {
        let due = state.withLock { state -> [Wakeup]? in
            guard (state.runScopes > 0) == exact, let earliest = state.sleepers.values.map(\.deadline).min() else {
                if !exact { state.isDriving = false }
                return nil
            }
            // Decided under the same lock as the firing: a step of the code under test that
            // began after the spell ended must not see its timeout fire right after it asked the
            // radio for something.
            if let quietSince, state.generation != quietSince { return [] }
            return state.takeDue(at: earliest)
        }
        guard let due else { return false }
        wake(due)
        return true
    }

    /// Runs on the executor's queue whenever the executor has nothing to run (or was asked to
    /// look): if nothing is on its way either, ``advance(to:)`` calls waiting for that go on, or
    /// else an automatic clock fires the earliest deadline.
    private func simulationIdle() {
        let (waking, checks, unseen) = state.withLock { ($0.waking, $0.handOffChecks, $0.unseenWorkChecks) }
        // Work on its way that the executor does not run: its end asks for another look (a
        // woken sleeper as it returns, a consumer as it takes its value).
        guard waking.isEmpty, !checks.contains(where: { $0() }) else { return }
        // Work whose end nothing reports: look again shortly rather than wait for a report.
        guard !unseen.contains(where: { $0() }) else {
            simulation.look(after: .milliseconds(1))
            return
        }
        let settled = state.withLock { state in
            defer { state.settling = [] }
            return state.settling
        }
        guard settled.isEmpty else {
            for continuation in settled { continuation.resume() }
            // An automatic clock goes on by itself once they are done.
            if mode == .automatic { simulation.look() }
            return
        }
        guard mode == .automatic, fireEarliest(exact: true) else { return }
        // Actions run here and tasks woken off the executor enqueue nothing on it: look again.
        simulation.look()
    }
}
