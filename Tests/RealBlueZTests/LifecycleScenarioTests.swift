import Able
import AbleScenarios
import Testing

extension RealBlueZ {
    /// The long-running-app scenarios on real BlueZ, hci0 the central and hci1 the peripheral:
    /// the same ones `AbleSimulatorTests` runs on the simulated radio.
    @Suite(.timeLimit(.minutes(3)))
    struct LifecycleScenarios {
        @Test(arguments: LifecycleScenario.allCases.filter { $0 != .serviceChanges })
        func scenario(_ scenario: LifecycleScenario) async throws {
            try await withRig { rig in try await scenario.run(on: BlueZLifecycleScenarioBackend(rig: rig)) }
        }

        /// The service-change scenario on its own, so that it can be run alone
        /// (`--filter 'LifecycleScenarios/serviceChanges'`).
        @Test func serviceChanges() async throws {
            try await withRig { rig in
                try await LifecycleScenario.serviceChanges.run(on: BlueZLifecycleScenarioBackend(rig: rig))
            }
        }
    }
}

/// The guest's adapters; taking hci1 away stops `bluetoothd` (which removes every adapter from
/// D-Bus), bringing it back starts it again.
struct BlueZLifecycleScenarioBackend: LifecycleScenarioBackend, ScenarioBackendWrapper {
    let base: BlueZScenarioBackend

    init(rig: Rig) { base = BlueZScenarioBackend(rig: rig) }

    func adapters() async throws -> [Adapter] { try await Adapter.all() }
    func adapterEvents() async throws -> AsyncStream<AdapterEvent> { try await Adapter.events() }

    func removePeripheralAdapter() async throws {
        #expect(try await Guest.restartBluetoothd("stop") == 0, "restart-bluetoothd stop failed")
    }

    func restorePeripheralAdapter() async throws {
        #expect(try await Guest.restartBluetoothd("start") == 0, "restart-bluetoothd start failed")
    }

    func dropLink() async throws {
        // hci1 ends the link, as a peripheral that resets does.
        let centralAddress = try #require(await central.state.address)
        try await peripheral.peripheral(address: centralAddress).disconnect()
    }

    func restartStack() async throws {
        #expect(try await Guest.restartBluetoothd() == 0, "restart-bluetoothd failed")
    }

    func stopStack() async throws { try await removePeripheralAdapter() }

    func startStack() async throws { try await restorePeripheralAdapter() }
}
