import AbleCore
import Testing

struct ReconnectPolicyTests {
    @Test(
        "Transient connection failures are retried, refusals that would recur are not",
        arguments: [
            (BluetoothError.Code.connectionAttemptFailed, "le-connection-abort-by-local", true),
            (.failed, "Software caused connection abort", true),
            (.failed, "Input/output error", true),
            (.failed, "Connection timed out", true),
            (.failed, "", true),
            (.inProgress, "In Progress", true),
            (.notReady, "Resource Not Ready", true),
            (.timeout, "no answer", true),
            (.authenticationFailed, "Authentication Failed", false),
            (.notPermitted, "Not Permitted", false),
            (.failed, "Device is blocked", false),
        ])
    func transientFailures(code: BluetoothError.Code, message: String, transient: Bool) {
        #expect(ReconnectPolicy.isTransient(BluetoothError(code, message: message)) == transient)
    }

    @Test("A request that a link drop interrupted is transient, other ATT errors are not")
    func attErrors() {
        #expect(ReconnectPolicy.isTransient(BluetoothError(attError: .unlikelyError)))
        #expect(!ReconnectPolicy.isTransient(BluetoothError(attError: .readNotPermitted)))
    }

    @Test func delaysStartOverFromTheInitialOneAndNeverExceedTheMaximum() {
        let policy = ReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(10), multiplier: 3)
        #expect((1...4).map(policy.delay(afterFailures:)) == [.seconds(1), .seconds(3), .seconds(9), .seconds(10)])
        #expect(policy.delay(afterFailures: 1_000) == .seconds(10))
        #expect(ReconnectPolicy(multiplier: 0.5).multiplier == 1)
    }
}
