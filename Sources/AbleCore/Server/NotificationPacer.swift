import AbleIO

/// Who a notification goes to, for pacing: a named central, or the subscribers a backend cannot
/// name (BlueZ before 5.69 tells a server that a characteristic has subscribers, not who).
package enum PacingKey: Hashable, Sendable {
    case central(BluetoothAddress)
    case unnamed

    init(_ central: Central?) {
        self = central.map { .central($0.address) } ?? .unnamed
    }
}

/// The token buckets of ``NotificationPacing``, as a generic cell rate algorithm: each key keeps
/// the theoretical time its next token is due, which makes a reservation one step under a lock,
/// exact on any clock, and in the order reservations are made.
package struct NotificationPacerState: Sendable {
    package let pacing: NotificationPacing
    /// When each key's bucket is next due to be full again, on the backend's clock.
    private var due: [PacingKey: Duration] = [:]

    package init(pacing: NotificationPacing) {
        self.pacing = pacing
    }

    /// Takes one token from every key's bucket and says when the notification may go: `now` if
    /// every bucket had a token, else the time the emptiest bucket has one again.
    package mutating func reserve(_ keys: Set<PacingKey>, now: Duration) -> Duration {
        let interval = pacing.interval
        let slack = interval * (pacing.burst - 1)
        var emission = now
        for key in keys { emission = max(emission, (due[key] ?? now) - slack) }
        for key in keys { due[key] = max(due[key] ?? now, emission) + interval }
        return emission
    }

    /// Forgets a key whose bucket is full again, so that the table does not grow with every
    /// central ever seen.
    package mutating func forgetIdle(now: Duration) {
        due = due.filter { $0.value > now }
    }
}

/// ``NotificationPacerState`` behind a lock, with the backend's clock to wait on.
package final class NotificationPacer: Sendable {
    private let state: Lock<NotificationPacerState>

    package init(pacing: NotificationPacing) {
        state = Lock(NotificationPacerState(pacing: pacing))
    }

    /// Waits until every key has a token, taking one from each.
    package func wait(for keys: Set<PacingKey>, backend: any GATTServerBackend) async throws {
        guard !keys.isEmpty else { return }
        let now = backend.clockReading
        let emission = state.withLock { state in
            state.forgetIdle(now: now)
            return state.reserve(keys, now: now)
        }
        if emission > now { try await backend.sleep(for: emission - now) }
    }
}
