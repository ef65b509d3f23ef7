import AbleCore
import Testing

/// The token buckets behind ``NotificationPacing``, stepped by hand.
struct NotificationPacerStateTests {
    let a = PacingKey.central(BluetoothAddress("00:AA:01:00:00:00"))
    let b = PacingKey.central(BluetoothAddress("00:AA:01:02:00:02"))

    @Test func aBurstGoesAtOnceThenOneGoesPerInterval() {
        var pacer = NotificationPacerState(pacing: .perSecond(10, burst: 3))
        let times: [Duration] = (0..<6).map { _ in pacer.reserve([a], now: .zero) }
        let expected: [Duration] = [.zero, .zero, .zero, .milliseconds(100), .milliseconds(200), .milliseconds(300)]
        #expect(times == expected)
    }

    @Test func aQuietSpellRefillsTheBucketUpToTheBurstOnly() {
        var pacer = NotificationPacerState(pacing: .perSecond(10, burst: 2))
        for _ in 0..<4 { _ = pacer.reserve([a], now: .zero) }
        // Ten seconds later the bucket holds 2 tokens, not 100.
        let later = Duration.seconds(10)
        let times: [Duration] = (0..<3).map { _ in pacer.reserve([a], now: later) }
        #expect(times == [later, later, later + .milliseconds(100)])
    }

    @Test func notifyingEveryoneWaitsForTheEmptiestBucket() {
        var pacer = NotificationPacerState(pacing: .perSecond(10, burst: 2))
        // Two values to a alone spend its burst; b's is untouched.
        #expect(pacer.reserve([a], now: .zero) == .zero)
        #expect(pacer.reserve([a], now: .zero) == .zero)
        #expect(pacer.reserve([a, b], now: .zero) == .milliseconds(100))
        #expect(pacer.reserve([a, b], now: .zero) == .milliseconds(200))
        // Later, b's bucket has tokens again, whatever a's holds.
        #expect(pacer.reserve([b], now: .milliseconds(400)) == .milliseconds(400))
    }

    @Test func noKeyMeansNoWait() {
        var pacer = NotificationPacerState(pacing: .perSecond(1, burst: 1))
        #expect(pacer.reserve([], now: .seconds(5)) == .seconds(5))
        #expect(pacer.reserve([], now: .seconds(5)) == .seconds(5))
    }

    @Test func theDefaultIsTwentyPerSecondInBurstsOfThree() {
        #expect(NotificationPacing.default == .perSecond(20, burst: 3))
        #expect(NotificationPacing.default.interval == .milliseconds(50))
    }
}
