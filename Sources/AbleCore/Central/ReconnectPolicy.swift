/// How a ``MaintainedConnection`` reconnects: how long each attempt may take, how long it waits
/// between failed attempts, and when it gives up.
///
/// The delays grow from ``initialDelay`` by ``multiplier`` after each failed attempt, up to
/// ``maximumDelay``; a successful connection starts them over. After a link loss the first
/// attempt is made at once.
///
/// ```swift
/// let policy = ReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(60), maximumAttempts: nil)
/// ```
public struct ReconnectPolicy: Sendable, Hashable {
    /// How long one connection attempt may take, services included.
    public var connectTimeout: Duration
    /// The wait after the first failed attempt.
    public var initialDelay: Duration
    /// The longest wait between attempts.
    public var maximumDelay: Duration
    /// What each wait is multiplied by after another failed attempt (at least 1).
    public var multiplier: Double
    /// How many attempts in a row may fail before the connection gives up; `nil` never gives up.
    public var maximumAttempts: Int?

    /// A policy; by default 10 s per attempt, waits of 0.5 s doubling up to 30 s, never giving up.
    public init(
        connectTimeout: Duration = .seconds(10), initialDelay: Duration = .milliseconds(500),
        maximumDelay: Duration = .seconds(30), multiplier: Double = 2, maximumAttempts: Int? = nil
    ) {
        self.connectTimeout = connectTimeout
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = max(1, multiplier)
        self.maximumAttempts = maximumAttempts
    }

    /// The wait after `failures` failed attempts in a row (1 for the first).
    public func delay(afterFailures failures: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(1, failures) {
            delay = min(maximumDelay, delay * multiplier)
            if delay >= maximumDelay { break }
        }
        return min(delay, maximumDelay)
    }

    /// Whether a failed attempt is worth another: the transient failures BlueZ reports
    /// (`le-connection-abort-by-local`, `Software caused connection abort`, `In Progress`,
    /// `Input/output error`, a connection that dropped or timed out), an adapter that is off, absent or whose
    /// `bluetoothd` restarts, and a resource that is not available for now
    /// (``BluetoothError/Code/notAvailable``, such as the system bus refusing a call beyond its limits). A refusal that another attempt would meet again (an authentication
    /// failure, a blocked device, an unsupported operation) is not.
    public static func isTransient(_ error: any Error) -> Bool {
        guard let error = error as? BluetoothError else { return false }
        switch error.code {
        case .connectionAttemptFailed, .inProgress, .disconnected, .notConnected, .timeout, .notReady, .notPowered,
            .notAvailable, .adapterRemoved, .daemonUnavailable, .doesNotExist:
            return true
        case .failed:
            // "Input/output error": BlueZ's Connect when the kernel's LE connection attempt failed
            // (an adapter powered off or a link dropped meanwhile, seen in the soak on 5.82).
            return [
                "le-connection-abort-by", "Software caused connection abort", "In Progress", "Connection refused",
                "Input/output error", "Connection timed out",
            ]
            .contains { error.message.contains($0) } || error.message.isEmpty
        case .attError:
            // A request the link drop interrupted.
            return error.attError == .unlikelyError
        default:
            return false
        }
    }
}
