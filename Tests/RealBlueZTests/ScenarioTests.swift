import Able
import AbleDBus
import AbleScenarios
import Testing

extension RealBlueZ {
    /// The scenario suite on real BlueZ, hci0 the central and hci1 the peripheral: the same
    /// scenarios `AbleSimulatorTests` runs on the simulated radio.
    @Suite(.timeLimit(.minutes(3)))
    struct Scenarios {
        @Test(arguments: Scenario.allCases)
        func scenario(_ scenario: Scenario) async throws {
            try await withRig { rig in try await scenario.run(on: BlueZScenarioBackend(rig: rig)) }
        }
    }
}

/// The guest's adapters through a ``Rig``; after a scenario each forgets the other.
struct BlueZScenarioBackend: ScenarioBackend {
    let rig: Rig

    var central: Adapter { rig.central }
    var peripheral: Adapter { rig.peripheral }
    var discoveryTimeout: Duration { Rig.discoveryTimeout }
    var connectTimeout: Duration { Rig.connectTimeout }

    func pause(_ duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }

    func tearDown() async throws {
        await rig.forgetEachOther()
    }

    var bluezVersion: (major: Int, minor: Int)? { Guest.bluezVersion.map { ($0.major, $0.minor) } }
}
