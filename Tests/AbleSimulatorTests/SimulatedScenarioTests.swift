import Able
import AbleScenarios
import AbleSimulator
import Testing

/// The scenario suite on the simulated radio: the same scenarios `RealBlueZTests` runs on
/// hci0 and hci1 in the QEMU guest.
@Suite(.timeLimit(.minutes(1)))
struct SimulatedScenarioTests {
    @Test(arguments: Scenario.allCases)
    func scenario(_ scenario: Scenario) async throws {
        let backend = SimulatedScenarioBackend()
        try await backend.radio.run { try await scenario.run(on: backend) }
    }
}

/// Two adapters on a fresh simulated radio; nothing may be left open after a scenario.
struct SimulatedScenarioBackend: ScenarioBackend {
    let radio = SimulatedRadio()
    let central: Adapter
    let peripheral: Adapter

    init() {
        central = radio.makeAdapter(name: "hci0")
        peripheral = radio.makeAdapter(name: "hci1")
    }

    var discoveryTimeout: Duration { .seconds(30) }
    var connectTimeout: Duration { .seconds(30) }
    var namesSubscribers: Bool { true }
    var reportsDisconnectionReasons: Bool { true }
    var notifiesOneCentral: Bool { true }
    var indicatesOneCentral: Bool { true }
    /// The simulated radio imitates BlueZ 5.82 but is no BlueZ: version conditions do not apply.
    var bluezVersion: (major: Int, minor: Int)? { nil }
    var now: Duration? { radio.clock.now.offset }

    func pause(_ duration: Duration) async throws {
        try await radio.clock.sleep(for: duration)
    }

    func tearDown() async throws {
        #expect(radio.openResources == [])
    }
}

/// The advertising scenarios on the simulated radio, whose adapters imitate BlueZ 5.82 on the
/// guest's emulated controllers (``SimulatedRadio/defaultAdvertisingCapabilities``).
@Suite(.timeLimit(.minutes(1)))
struct SimulatedAdvertisingScenarioTests {
    @Test(arguments: AdvertisingScenario.allCases)
    func scenario(_ scenario: AdvertisingScenario) async throws {
        let backend = SimulatedScenarioBackend()
        try await backend.radio.run { try await scenario.run(on: backend) }
    }

    @Test(arguments: [AdvertisingScenario.scanResponseData, .refusals, .passiveScanning])
    func scenarioOnAnAdapterWithScanResponseDataAndExtendedAdvertising(_ scenario: AdvertisingScenario) async throws {
        let backend = SimulatedScenarioBackend()
        backend.radio.setAdvertisingCapabilities(
            AdvertisingCapabilities(
                availableInstances: 2, maximumAdvertisingDataLength: 251, txPowerRange: -20...10,
                secondaryChannels: [.le1M, .le2M], canSetTxPower: true, supportsParameters: true,
                supportsScanResponseData: true, extendsAutomatically: false),
            of: backend.peripheral)
        backend.radio.setPassiveScanning(true, of: backend.central)
        try await backend.radio.run { try await scenario.run(on: backend) }
    }
}
