import AbleCore
import Testing

struct ReconnectPolicyTests {
    @Test(
        "BlueZ's transient connection failures are retried, refusals that would recur are not",
        arguments: [
            ("org.bluez.Error.Failed", "le-connection-abort-by-local", true),
            ("org.bluez.Error.Failed", "Software caused connection abort", true),
            ("org.bluez.Error.Failed", "Input/output error", true),
            ("org.bluez.Error.Failed", "Connection timed out", true),
            ("org.bluez.Error.InProgress", "In Progress", true),
            ("org.bluez.Error.NotReady", "Resource Not Ready", true),
            ("org.bluez.Error.AuthenticationFailed", "Authentication Failed", false),
            ("org.bluez.Error.NotPermitted", "Not Permitted", false),
            ("org.bluez.Error.Failed", "Device is blocked", false),
        ])
    func transientFailures(name: String, message: String, transient: Bool) {
        #expect(ReconnectPolicy.isTransient(BluetoothError.fromBlueZ(name: name, message: message)) == transient)
    }

    @Test func delaysStartOverFromTheInitialOneAndNeverExceedTheMaximum() {
        let policy = ReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(10), multiplier: 3)
        #expect((1...4).map(policy.delay(afterFailures:)) == [.seconds(1), .seconds(3), .seconds(9), .seconds(10)])
        #expect(policy.delay(afterFailures: 1_000) == .seconds(10))
        #expect(ReconnectPolicy(multiplier: 0.5).multiplier == 1)
    }
}
