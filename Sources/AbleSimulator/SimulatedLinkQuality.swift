/// A link's injected quality: the share of notifications it loses and of connection events it
/// misses, drawn from a seeded generator so that a test sees the same losses on every run.
struct SimulatedLinkQuality {
    var notificationLoss = 0.0
    var missedConnectionEvents = 0.0
    var connectionInterval: Duration = .milliseconds(30)
    private var generator = SplitMix64(seed: 0)

    /// The supervision timeout of a typical link is a few connection events; a packet is not held
    /// longer than this many missed events.
    static let maximumMissedEvents = 6

    init() {}

    init(notificationLoss: Double, missedConnectionEvents: Double, connectionInterval: Duration, seed: UInt64) {
        self.notificationLoss = notificationLoss
        self.missedConnectionEvents = missedConnectionEvents
        self.connectionInterval = connectionInterval
        generator = SplitMix64(seed: seed)
    }

    /// Whether the next notification is lost.
    mutating func losesNotification() -> Bool {
        guard notificationLoss > 0 else { return false }
        return generator.nextUnit() < notificationLoss
    }

    /// How long the next packet waits for the connection events the link misses before it goes.
    mutating func missedEventsDelay() -> Duration {
        guard missedConnectionEvents > 0 else { return .zero }
        var missed = 0
        while missed < Self.maximumMissedEvents, generator.nextUnit() < missedConnectionEvents { missed += 1 }
        return connectionInterval * missed
    }
}

/// Sebastiano Vigna's SplitMix64: a small generator whose sequence depends on its seed alone.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in 0..<1 with 53 random bits.
    mutating func nextUnit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }
}
