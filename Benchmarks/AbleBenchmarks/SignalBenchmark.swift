import AbleDBus
import AbleIO
import Synchronization

/// What `Benchmarks/C/signal-emitter.c` sends: BlueZ's notification of a characteristic's new value.
enum NotificationShape {
    static let path: DBusObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001/char0002"
    static let interface = "org.bluez.GattCharacteristic1"
    static let valueLength = 20
    static let rule = DBusMatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged")

    /// Decodes `PropertiesChanged(s interface, a{sv} changed, as invalidated)` as a BlueZ client
    /// would, and returns the sequence number in the first 8 bytes of `Value` (little-endian).
    static func sequenceNumber(of signal: DBusSignal) throws -> UInt64 {
        guard signal.path == path, signal.arguments.count == 3,
            try signal.arguments[0].decode(String.self) == interface
        else { throw BenchmarkFailure("unexpected signal \(signal)") }
        let changed = try signal.arguments[1].decode([String: DBusVariant].self)
        _ = try signal.arguments[2].decode([String].self)
        guard let value = try changed.decode("Value", as: [UInt8].self), value.count == valueLength else {
            throw BenchmarkFailure("PropertiesChanged without a \(valueLength)-byte Value: \(signal)")
        }
        return value.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
    }
}

/// Counts values and checks their sequence numbers for gaps and reordering, and notes when the
/// first value was taken: a receiver's figure spans the values after the first, from that moment
/// to the last, as the C receivers count (`bench_report_span`), so that subscribing is not part of
/// the CPU per value. No clock is read for the values after the first.
struct SequenceCheck {
    var expected: UInt64 = 0
    var received = 0
    var lost = 0
    var reordered = 0
    /// When the first value was taken.
    var first: Mark?
    /// When the check was done, noted by whoever saw it done (`nil` if it never was).
    var end: Mark?

    mutating func note(_ sequence: UInt64) {
        if received == 0 { first = Mark.now() }
        received += 1
        if sequence == expected {
            expected += 1
        } else if sequence > expected {
            lost += Int(sequence - expected)
            expected = sequence + 1
        } else {
            reordered += 1
        }
    }
}

/// How many signals the loop has taken, for the watchdog.
final class Progress: Sendable {
    let received = Atomic<Int>(0)
}

/// The `for try await` loop over a stream of numbered values, checking each value's sequence
/// number, until `count` have been expected. It runs where its caller is isolated: on the global
/// executor from a `nonisolated` function, on an actor's executor from the actor.
func receiveNumbered<Values: AsyncSequence>(
    _ stream: Values, count: Int, progress: Progress, isolation: isolated (any Actor)? = #isolation,
    sequenceNumber: (Values.Element) throws -> UInt64
) async throws -> SequenceCheck {
    var check = SequenceCheck()
    var iterator = stream.makeAsyncIterator()
    while let value = try await iterator.next(isolation: isolation) {
        check.note(try sequenceNumber(value))
        progress.received.store(check.received, ordering: .relaxed)
        if check.expected >= count {
            check.end = Mark.now()
            break
        }
    }
    return check
}

/// The loop over signals, on the global executor.
nonisolated func receiveOnGlobalExecutor(_ stream: DBusSignalStream, count: Int, progress: Progress) async throws
    -> SequenceCheck
{
    try await receiveNumbered(
        stream, count: count, progress: progress, sequenceNumber: NotificationShape.sequenceNumber)
}

extension SharedExecutorRunner {
    /// The same loop, on the connection's executor.
    func receive(_ stream: DBusSignalStream, count: Int, progress: Progress) async throws -> SequenceCheck {
        try await receiveNumbered(
            stream, count: count, progress: progress, sequenceNumber: NotificationShape.sequenceNumber)
    }
}

/// Cancels `receiving` once no value came for 5 s (30 s before the first).
func startWatchdog(cancelling receiving: Task<SequenceCheck, any Error>, progress: Progress) -> Task<Void, Never> {
    Task.detached {
        var seen = 0
        var idle = 0.0
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(250))
            let received = progress.received.load(ordering: .relaxed)
            if received != seen {
                seen = received
                idle = 0
            } else {
                idle += 0.25
                if idle > (received == 0 ? 30 : 5) {
                    receiving.cancel()
                    return
                }
            }
        }
    }
}

extension SequenceCheck {
    /// Where a receiver's figure starts and ends: at the first value and when the check was done
    /// (else at `end`); both at the end when fewer than two values came, so that nothing is counted.
    func span(endingBy end: Mark) -> (first: Mark, end: Mark) {
        let end = self.end ?? end
        return (received > 1 ? first ?? end : end, end)
    }

    /// The figure of a run that expected `count` values: the values after the first, wall and CPU
    /// from the moment the first was taken to the end (when the check was done, else `end`), every
    /// value missing at the end counted as lost; and, for information, the CPU from `start` (just
    /// before subscribing) to the first value.
    func measurement(expecting count: Int, start: Mark, end: Mark, dropped: Int) -> Measurement {
        let (first, end) = span(endingBy: end)
        return Measurement(
            operations: max(received - 1, 0), wall: end.wall - first.wall, start: first, end: end,
            lost: lost + max(count - Int(expected), 0), reordered: reordered, dropped: dropped,
            setup: first.user + first.system - start.user - start.system)
    }
}

/// Where `signals` takes the signals.
enum SignalConsumer: String {
    /// A `for try await` loop over `signals(matching:)` in a task on the global executor.
    case global
    /// The same loop in an actor that shares the connection's executor.
    case shared
    /// `subscribe(matching:handler:)`: the handler, called on the connection's event loop with
    /// each decoded signal; no buffer and no task per signal.
    case handler
}

/// Subscribes, prints `READY` (the script then starts the emitter), and receives `count` signals;
/// gives up after 5 s without one (30 s before the first).
func runSignals(address: String, count: Int, bufferLimit: Int, consumer: SignalConsumer) async throws -> Measurement {
    let connection = try await DBusConnection.connect(to: .address(address))
    let measurement =
        switch consumer {
        case .handler: try await receiveInHandler(on: connection, count: count)
        case .global, .shared:
            try await receiveFromStream(
                on: connection, count: count, bufferLimit: bufferLimit, onConnectionExecutor: consumer == .shared)
        }
    await connection.close()
    return measurement
}

/// `signals` through a `for try await` loop over `signals(matching:)`.
private func receiveFromStream(
    on connection: DBusConnection, count: Int, bufferLimit: Int, onConnectionExecutor: Bool
) async throws -> Measurement {
    let runner = SharedExecutorRunner(connection)
    let stream = try await connection.signals(matching: NotificationShape.rule, bufferLimit: bufferLimit)
    let progress = Progress()
    let start = Mark.now()
    printAndFlush("READY")
    let receiving = Task.detached {
        if onConnectionExecutor {
            try await runner.receive(stream, count: count, progress: progress)
        } else {
            try await receiveOnGlobalExecutor(stream, count: count, progress: progress)
        }
    }
    let watchdog = startWatchdog(cancelling: receiving, progress: progress)
    let check = try await receiving.value
    let end = Mark.now()
    watchdog.cancel()
    return check.measurement(expecting: count, start: start, end: end, dropped: stream.droppedCount)
}

/// `signals` through ``SignalConsumer/handler``: each signal is decoded and checked in the
/// handler, on the event loop, until `count` have been expected.
private func receiveInHandler(on connection: DBusConnection, count: Int) async throws -> Measurement {
    let check = SharedSequenceCheck(count: count)
    let reached = AsyncStream<Void>.makeStream()
    let subscription = try await connection.subscribe(matching: NotificationShape.rule) { signal in
        if check.note(try? NotificationShape.sequenceNumber(of: signal)) { reached.continuation.finish() }
    }
    let start = Mark.now()
    printAndFlush("READY")
    // Ends when the handler has seen `count`, or when the watchdog cancels it (an `AsyncStream`'s
    // loop ends with its task's cancellation).
    let receiving = Task<SequenceCheck, any Error> {
        for await _ in reached.stream {}
        return check.result
    }
    let watchdog = startWatchdog(cancelling: receiving, progress: check.progress)
    let result = try await receiving.value
    let end = Mark.now()
    watchdog.cancel()
    subscription.cancel()
    return result.measurement(expecting: count, start: start, end: end, dropped: 0)
}

/// A ``SequenceCheck`` fed by a handler that other threads call, one value at a time.
///
/// Behind a `Mutex`, not Able's `Lock`: a `Mutex` lives inside this object, next to what it
/// guards, and takes and leaves the uncontended lock with one atomic instruction each, with no call
/// into the C library. The C receivers check values with no lock at all; the harness's own share
/// of Able's figure stays that small. (Able's `Lock` is a `pthread_mutex_t` so that
/// ThreadSanitizer sees it; the benchmarks do not run under ThreadSanitizer.)
final class SharedSequenceCheck: Sendable {
    private let check = Mutex(SequenceCheck())
    private let count: Int
    /// How many values were noted, for the watchdog.
    let progress: Progress

    /// A check that is done when `count` values have been expected, and tells `progress` how many
    /// it has seen.
    init(count: Int, progress: Progress = Progress()) {
        self.count = count
        self.progress = progress
    }

    /// Notes a value's sequence number; `nil` (a value of another shape) counts as lost, which
    /// fails the run.
    ///
    /// - Returns: Whether the check is done: `count` values expected, or a value of another shape.
    func note(_ sequence: UInt64?) -> Bool {
        check.withLock { check in
            guard let sequence else {
                check.lost += 1
                return true
            }
            check.note(sequence)
            progress.received.store(check.received, ordering: .relaxed)
            guard check.expected >= count else { return false }
            check.end = Mark.now()
            return true
        }
    }

    /// What the check saw so far.
    var result: SequenceCheck { check.withLock { $0 } }
}
