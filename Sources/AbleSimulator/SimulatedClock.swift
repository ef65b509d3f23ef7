import Able
import AbleStreams

/// The clock of a ``SimulatedRadio``: virtual time that the test controls, on which every
/// simulated delay and every timeout of the radio's adapters runs.
///
/// Nothing waits in real time. Advertising intervals, connection and service-resolution times,
/// delayed notifications, and the timeouts of ``/Able/Peripheral/connect(timeout:)`` and
/// ``/Able/ScanStream/first(timeout:)`` on the radio's adapters are deadlines on this clock; the
/// code under test can sleep on it too (`try await radio.clock.sleep(for: .seconds(1))`).
///
/// **Automatic mode** (the default): time jumps to the next deadline as soon as everything is
/// waiting. The clock knows that from its ``executor``, which runs the simulation one job at a
/// time: run the code under test on it with ``run(_:)`` (or ``SimulatedRadio/run(_:)``), and
/// its child tasks, the actors it calls and the tasks Able starts for it run there too. When
/// the executor has nothing left to run, no sleeper woken off the executor is still on its
/// way, and no scan or notification stream of the radio has woken a consumer that has not come
/// for its value, the earliest deadline fires; sleepers with the same deadline wake in the
/// order they went to sleep. This never depends on real time or on how threads are scheduled:
/// a loaded machine runs the same simulation, only slower.
///
/// The limit: work the executor does not run is not waited for, and a timeout may fire while it
/// runs: tasks started with `Task {}` (start them with
/// `Task(executorPreference: radio.clock.executor)`), code that is not inside ``run(_:)``, and
/// anything waiting outside the clock and the radio (a file, a real socket, a `DispatchQueue`;
/// data on a simulated L2CAP channel moves through a real socket pair). Tests of such code use
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
        /// Calls of ``advance(to:)`` waiting for what a deadline woke to be done.
        var settling: [UnsafeContinuation<Void, Never>] = []
    }

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
    /// Call it from code that is not isolated to an actor (such as a test function): isolated
    /// code runs on its actor's executor, not on the clock's.
    public func run<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        try await InheritedExecutor.$preferred.withValue(simulation) {
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
            if state.withLock({ $0.waking.remove(id) }) != nil { simulation.look() }
        }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Bool? in
                    // Cancellation sets the flag before `onCancel` takes the lock: a sleeper
                    // registered after that would never be woken.
                    guard !Task.isCancelled else { return nil }
                    guard deadline > state.now else { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline, wakeup: .continuation(continuation))
                    return false
                }
                switch resumeNow {
                case nil: continuation.resume(throwing: CancellationError())
                case true?: continuation.resume()
                case false?: deadlineAdded()
                }
            }
        } onCancel: {
            let removed = state.withLock { $0.sleepers.removeValue(forKey: id) }
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
            if case .action = state.sleepers[token]?.wakeup { state.sleepers[token] = nil }
        }
    }

    /// Adds a check of values handed to consumers and not yet taken, which time waits for;
    /// whoever sees such a hand-off end calls ``handOffEnded()``.
    func addHandOffCheck(_ check: @escaping @Sendable () -> Bool) {
        state.withLock { $0.handOffChecks.append(check) }
    }

    /// A value handed to a consumer was taken: time may move again.
    func handOffEnded() {
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
        let due = state.withLock { state -> [Wakeup] in
            if deadline > state.now { state.now = deadline }
            let ids = state.sleepers.filter { $0.value.deadline <= deadline }.keys.sorted()
            return ids.compactMap { id -> Wakeup? in
                guard let wakeup = state.sleepers.removeValue(forKey: id)?.wakeup else { return nil }
                if case .continuation = wakeup { state.waking.insert(id) }
                return wakeup
            }
        }
        for wakeup in due {
            switch wakeup {
            case .continuation(let continuation): continuation.resume()
            case .action(let action): action()
            }
        }
    }

    /// Waits until what the last deadline woke is done: the executor idle and nothing on its way.
    private func settle() async {
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            state.withLock { $0.settling.append(continuation) }
            simulation.look()
        }
    }

    /// A sleeper or an action was added: an automatic clock looks whether it is due.
    private func deadlineAdded() {
        if mode == .automatic { simulation.look() }
    }

    /// Runs on the executor's queue whenever the executor has nothing to run (or was asked to
    /// look): if nothing is on its way either, ``advance(to:)`` calls waiting for that go on, or
    /// else an automatic clock fires the earliest deadline.
    private func simulationIdle() {
        let (waking, checks) = state.withLock { ($0.waking, $0.handOffChecks) }
        // Work on its way that the executor does not run: its end asks for another look (a
        // woken sleeper as it returns, a consumer as it takes its value).
        guard waking.isEmpty, !checks.contains(where: { $0() }) else { return }
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
        guard mode == .automatic, let next = nextDeadline(notAfter: nil) else { return }
        fire(at: next)
        // Actions run here and tasks woken off the executor enqueue nothing on it: look again.
        simulation.look()
    }
}
