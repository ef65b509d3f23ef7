import Able
import AbleScenarios
import AbleSimulator
import Testing

/// The long-running-app scenarios on the simulated radio: the same ones `RealBlueZTests` runs in
/// the QEMU guest.
@Suite(.timeLimit(.minutes(1)))
struct SimulatedLifecycleScenarioTests {
    @Test(arguments: LifecycleScenario.allCases)
    func scenario(_ scenario: LifecycleScenario) async throws {
        let backend = SimulatedLifecycleScenarioBackend()
        let exact: Set<LifecycleScenario> = [
            .aConnectUnderWayEndsWhenTheStackGoes, .aLinkLossUnderASubscriptionIsReportedAtOnce,
            .setUpRunsOnEveryConnectionBeforeValuesFlow, .aServerOutlivesTheStack,
        ]
        guard exact.contains(scenario) else {
            try await scenario.run(on: backend)
            return
        }
        // Exact time: a link loss's events are pinned to the instant of the drop, and the stack
        // must go within the connect's 60 s. Outside `run` the clock
        // guesses from quiet spells of real time, and a slow run (the thread sanitizer's) once
        // let it reach the connect's deadline before the scenario, just woken from its pause,
        // took the adapters away.
        try await backend.radio.run { try await scenario.run(on: backend) }
    }
}

/// Two adapters on a fresh simulated radio, the peripheral's removable.
struct SimulatedLifecycleScenarioBackend: LifecycleScenarioBackend, ScenarioBackendWrapper {
    let base = SimulatedScenarioBackend()

    var radio: SimulatedRadio { base.radio }

    func adapters() async throws -> [Adapter] { radio.adapters() }
    func adapterEvents() async throws -> AsyncStream<AdapterEvent> { radio.adapterEvents() }
    func removePeripheralAdapter() async throws { radio.removeAdapter(named: peripheral.name) }
    func restorePeripheralAdapter() async throws { _ = radio.makeAdapter(name: peripheral.name) }
    /// The stack stays away for two seconds of the radio's time: long enough for a maintained
    /// connection's attempts to meet `daemonUnavailable`.
    func restartStack() async throws { try await radio.restartStack(down: .seconds(2)) }

    func stopStack() async throws { radio.stopStack() }

    func startStack() async throws { radio.startStack() }

    func dropLink() async throws {
        guard let address = await peripheral.state.address else { return }
        radio.peripheral(address).disconnectAll(reason: .peerDisconnected)
    }
}
