import Able
import AbleScenarios
import Testing

extension RealBlueZ {
    /// The standing pairing agent's scenarios on real BlueZ, hci0 the central and hci1 the
    /// server, each with its own agent: the same ones `AbleSimulatorTests` runs on the simulated
    /// radio.
    @Suite(.timeLimit(.minutes(3)))
    struct PairingScenarios {
        @Test(arguments: PairingScenario.allCases)
        func scenario(_ scenario: PairingScenario) async throws {
            try await withRig { rig in try await scenario.run(on: BlueZScenarioBackend(rig: rig)) }
        }
    }
}
