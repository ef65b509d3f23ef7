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
/// waiting. "Everything is waiting" is detected as a quiet spell: the clock has sleepers, and
/// while its driver yields the cooperative thread pool a number of times in a row (letting
/// every task that was ready run first), no sleeper is added or removed and the radio sees no
/// operation. The spell is extended, a bounded number of times, while a sleeper it woke has
/// not run yet or a scan or notification stream of the radio holds values its consumer has
/// not taken. Then the earliest deadline fires, and the clock looks for the next quiet spell.
/// Sleepers with the same deadline wake in the order they went to sleep. No real time passes:
/// the driver yields, it never sleeps.
///
/// The limit: work the clock cannot see — a task busy computing for longer than the quiet
/// spell, or one waiting on something outside the radio and the clock (a file, a real
/// socket, a `DispatchQueue`) — is not waited for, and a timeout may fire while it runs.
/// Tests of such code use **manual mode**, in which time moves only when the test calls
/// ``advance(by:)`` or ``advance(to:)``.
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
        /// Changes whenever something happens that could add an earlier deadline.
        var generation: UInt64 = 0
        var isDriving = false
        /// Sleepers resumed whose tasks have not run yet: a quiet spell waits for them.
        var waking: Set<UInt64> = []
        /// Say whether work the clock woke is still to be done (such as values a stream holds
        /// for its consumer); a quiet spell is extended while one says so.
        var busyChecks: [@Sendable () -> Bool] = []
    }

    /// How many yields in a row without activity make a quiet spell.
    static let quietYields = 48
    /// How many more spells a quiet spell waits for while a busy check says work is pending.
    static let busySpells = 64

    private let state = Lock(State())

    /// How the clock moves.
    public let mode: Mode

    /// A clock at zero.
    ///
    /// - Parameter mode: ``Mode/automatic`` (the default) or ``Mode/manual``.
    public init(mode: Mode = .automatic) {
        self.mode = mode
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
        defer { _ = state.withLock { $0.waking.remove(id) } }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                let resumeNow = state.withLock { state -> Bool? in
                    // Cancellation sets the flag before `onCancel` takes the lock: a sleeper
                    // registered after that would never be woken.
                    guard !Task.isCancelled else { return nil }
                    guard deadline > state.now else { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline, wakeup: .continuation(continuation))
                    state.generation &+= 1
                    return false
                }
                switch resumeNow {
                case nil: continuation.resume(throwing: CancellationError())
                case true?: continuation.resume()
                case false?: startDriving()
                }
            }
        } onCancel: {
            let removed = state.withLock { state -> Sleeper? in
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
            state.generation &+= 1
            return state.nextID
        }
        guard let id else {
            action()
            return 0
        }
        startDriving()
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

    /// Adds a check of pending work that a quiet spell waits for (within ``busySpells`` spells).
    func addBusyCheck(_ check: @escaping @Sendable () -> Bool) {
        state.withLock { $0.busyChecks.append(check) }
    }

    /// Tells the clock that the radio did something: an automatic clock waits for a new quiet spell.
    func noteActivity() {
        state.withLock { $0.generation &+= 1 }
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
            state.generation &+= 1
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

    /// Lets every task that is ready run until nothing happens for a quiet spell.
    ///
    /// A spell is also extended, a bounded number of times, while a busy check reports work
    /// that woken tasks have yet to do, such as discoveries or notifications a stream holds for
    /// a consumer that was preempted: so a timeout does not overtake what came before it in
    /// simulated time when the machine is loaded. The bound keeps a test that leaves values in
    /// a stream on purpose from stopping time.
    private func settle() async {
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
            let (checks, waking) = state.withLock { ($0.busyChecks, $0.waking) }
            guard busySpells < Self.busySpells, !waking.isEmpty || checks.contains(where: { $0() }) else { return }
            busySpells += 1
            quiet = 0
        }
    }

    private func startDriving() {
        guard mode == .automatic else { return }
        let start = state.withLock { state -> Bool in
            guard !state.isDriving else { return false }
            state.isDriving = true
            return true
        }
        guard start else { return }
        // One driver per busy period, not one task per sleeper.
        Task.detached { [self] in await drive() }
    }

    private func drive() async {
        while true {
            await settle()
            let next = state.withLock { state -> Instant? in
                guard let earliest = state.sleepers.values.map(\.deadline).min() else {
                    state.isDriving = false
                    return nil
                }
                return earliest
            }
            guard let next else { return }
            fire(at: next)
        }
    }
}
