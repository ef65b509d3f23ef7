import Able
import AbleBlueZ
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
    var namesSubscribers: Bool { (Guest.bluezVersion ?? .init(0, 0)) >= .init(5, 69) }
    /// `Device1.Disconnected` came with 5.83: neither version of the tier sends it.
    var reportsDisconnectionReasons: Bool { (Guest.bluezVersion ?? .init(0, 0)) >= .init(5, 83) }
    /// `RealBlueZ` is serialized, and the guest runs nothing else.
    var hasItsProcessToItself: Bool { true }
    var notifiesOneCentral: Bool { (Guest.bluezVersion ?? .init(0, 0)) >= .init(5, 76) }
    var indicatesOneCentral: Bool { (Guest.bluezVersion ?? .init(0, 0)) >= .init(5, 80) }
    /// BlueZ 5.66 opens EATT channels (`[GATT] Channels` defaults to 3), and on the emulated link
    /// their LE credit flow control carries about 8 PDUs a second (two values each, as Multiple
    /// Handle Value Notifications): less than the default 20 values a second, so bluetoothd's
    /// queue, and the wait of every request behind it, would grow. 5.82 uses one unenhanced
    /// channel, but the emulated link under QEMU (btvirt 5.87) is no faster: paced at the default
    /// 20 a second, bluetoothd's queue wandered at the link's limit and a request now and then
    /// waited a second behind it (4 runs: slowest 0.56–1.01 s), and at 15 still up to 0.8 s. A
    /// pacing under the link's capacity is what the feature asks of its user, so both versions
    /// run at 10.
    var serverPacing: NotificationPacing { .perSecond(10) }

    func pause(_ duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }

    func tearDown() async throws {
        await rig.forgetEachOther()
    }

    var bluezVersion: (major: Int, minor: Int)? { Guest.bluezVersion.map { ($0.major, $0.minor) } }
}
