import Dispatch

/// When a connection stops reading on every readiness event of its socket.
///
/// A readiness event through a dispatch source costs several times what a `poll()` loop pays
/// for it (the manager thread's `epoll_wait`, a worker's wake-up, a re-arm: `Scripts/bench
/// dbus` prints both), and a fast stream of signals, such as the notifications of a
/// characteristic, can bring an event for every signal or two. So when read events come less
/// than ``intervalNanoseconds`` apart and bring nothing but signals while no call awaits a reply, the
/// connection pauses its read source and reads the socket every ``intervalNanoseconds`` instead,
/// dispatching everything that came meanwhile in one batch (as network drivers do under load).
/// A tick that finds the socket empty or reads anything but signals, or a call being sent (its
/// reply must not wait), ends it.
///
/// The price is latency during such a flood only: a signal then waits up to ``intervalNanoseconds`` (1 ms;
/// BLE connection events are at least 7.5 ms apart).
struct ReadCoalescing {
    /// How often a coalescing connection reads its socket, and how close read events must come
    /// to start it.
    static let intervalNanoseconds: UInt64 = 1_000_000
    /// How late a tick may come.
    static let leeway = DispatchTimeInterval.microseconds(100)
    /// Reads per tick at most (libdbus reads 2 KiB at a time), so that a tick does not hold the
    /// queue for long however fast signals come.
    static let maximumReadsPerTick = 64

    /// How often this connection reads while coalescing, and how close read events must come to
    /// start it: ``intervalNanoseconds`` unless a test stretches it (a sanitizer slows every read
    /// event down more than it slows the flood).
    let nanoseconds: UInt64

    /// Whether the connection reads on its own schedule now.
    private(set) var isActive = false
    /// Ticks that read something, since the connection opened.
    private(set) var ticks = 0
    private var lastEvent: UInt64?

    init(intervalNanoseconds nanoseconds: UInt64 = Self.intervalNanoseconds) {
        self.nanoseconds = nanoseconds
    }

    /// Notes a read event at `now` (in uptime nanoseconds) and whether everything it brought was
    /// a signal while no call awaited a reply; returns whether to start coalescing.
    mutating func noteReadEvent(at now: UInt64, signalsOnly: Bool) -> Bool {
        defer { lastEvent = now }
        guard signalsOnly, !isActive, let lastEvent, now &- lastEvent < nanoseconds else { return false }
        isActive = true
        return true
    }

    /// Notes a tick: whether it read anything, and whether all of it was signals while no call
    /// awaited a reply; returns whether to go on coalescing.
    mutating func noteTick(read: Bool, signalsOnly: Bool) -> Bool {
        guard isActive else { return false }
        if read { ticks += 1 }
        isActive = read && signalsOnly
        return isActive
    }

    /// Ends coalescing; returns whether it was active.
    mutating func stop() -> Bool {
        defer { isActive = false }
        return isActive
    }
}
