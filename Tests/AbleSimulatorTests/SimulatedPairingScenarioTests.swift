import Able
import AbleScenarios
import AbleSimulator
import Testing

/// The standing pairing agent's scenarios on the simulated radio: the same ones `RealBlueZTests`
/// runs on hci0 and hci1 in the QEMU guest.
@Suite(.timeLimit(.minutes(1)))
struct SimulatedPairingScenarioTests {
    @Test(arguments: PairingScenario.allCases)
    func scenario(_ scenario: PairingScenario) async throws {
        let backend = SimulatedScenarioBackend()
        try await backend.radio.run { try await scenario.run(on: backend) }
    }
}
