import Able
import AbleDBus
import AbleTestSupport
import Testing

@testable import AbleBlueZ

/// The standing pairing agent against a fake BlueZ: one agent object for the process, registered
/// while any adapter has an agent, answering each request with the agent of the device's adapter.
@Suite(.timeLimit(.minutes(1)))
struct StandingAgentTests {
    func withAdapters(
        device: Bool = false, _ body: (FakeBlueZ, Adapter, Adapter, PrivateBus) async throws -> Void
    ) async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        // Kept until the end: the fake answers for it only while it lives.
        let device = device ? try await fake.addConnectableDevice(PeripheralTests.address, services: []) : nil
        defer { withExtendedLifetime(device) {} }
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let hci0 = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci0", system: system))
        let hci1 = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci1", system: system))
        try await body(fake, hci0, hci1, bus)
    }

    /// Asks the registered agent, as BlueZ does, to confirm a passkey for `device`; returns
    /// whether it accepted, or the error it answered other than a refusal.
    func confirm(_ device: String, from connection: DBusConnection, agent: (owner: String, path: DBusObjectPath))
        async throws -> Bool
    {
        do {
            _ = try await connection.call(
                destination: agent.owner, path: agent.path, interface: "org.bluez.Agent1",
                method: "RequestConfirmation", arguments: [.objectPath(DBusObjectPath(rawValue: device)!), .uint32(42)])
            return true
        } catch let error as DBusError where error.name.rawValue == "org.bluez.Error.Rejected" {
            return false
        }
    }

    static func agent(_ name: String, accepting: Bool, _ asked: Locked<[String]>) -> PairingAgent {
        PairingAgent(capability: .displayYesNo) { device, passkey in
            asked.value.append("\(name) \(device) \(passkey)")
            return accepting
        }
    }

    @Test func oneAgentAnswersEachAdapterWithItsOwnUntilTheLastIsCleared() async throws {
        try await withAdapters { fake, hci0, hci1, _ in
            let asked = Locked<[String]>([])
            try await hci0.setPairingAgent(Self.agent("hci0", accepting: true, asked))
            let registered = try #require(fake.agent.value)
            try await hci1.setPairingAgent(Self.agent("hci1", accepting: false, asked))
            let again = try #require(fake.agent.value)
            #expect(again.path == registered.path, "one agent object for the process")
            #expect(hci0.pairingAgent != nil && hci1.pairingAgent != nil)

            #expect(try await confirm("/org/bluez/hci0/dev_00_11_22_33_44_55", from: fake.connection, agent: again))
            #expect(try await !confirm("/org/bluez/hci1/dev_00_11_22_33_44_66", from: fake.connection, agent: again))
            #expect(asked.value == ["hci0 00:11:22:33:44:55 42", "hci1 00:11:22:33:44:66 42"])

            // hci1 without an agent: its requests are refused without asking anyone.
            try await hci1.setPairingAgent(nil)
            #expect(fake.agent.value != nil)
            #expect(try await !confirm("/org/bluez/hci1/dev_00_11_22_33_44_66", from: fake.connection, agent: again))
            #expect(asked.value.count == 2)

            try await hci0.setPairingAgent(nil)
            #expect(fake.agent.value == nil, "unregistered with the last agent")
            #expect(hci0.pairingAgent == nil)
        }
    }

    @Test func pairingWhileAStandingAgentIsSetUsesThePairingsAgentForThatDevice() async throws {
        try await withAdapters(device: true) { fake, hci0, _, _ in
            let asked = Locked<[String]>([])
            try await hci0.withPairingAgent(Self.agent("standing", accepting: false, asked)) {
                let peripheral = hci0.peripheral(address: BluetoothAddress(PeripheralTests.address)!)
                try await peripheral.pair(with: Self.agent("pairing", accepting: true, asked))
                try await waitUntil { await peripheral.isPaired }
                // Still registered for the standing agent.
                #expect(fake.agent.value != nil)
            }
            #expect(asked.value.map { $0.split(separator: " ").first } == ["pairing"])
            #expect(fake.agent.value == nil)
        }
    }

    @Test func onlyBlueZMayCallTheStandingAgent() async throws {
        try await withAdapters { fake, hci0, _, bus in
            let asked = Locked<[String]>([])
            try await hci0.setPairingAgent(Self.agent("hci0", accepting: true, asked))
            let agent = try #require(fake.agent.value)
            let stranger = try await bus.connect()
            let error = await #expect(throws: DBusError.self) {
                try await confirm("/org/bluez/hci0/dev_00_11_22_33_44_55", from: stranger, agent: agent)
            }
            #expect(error?.name == .accessDenied)
            #expect(asked.value.isEmpty)
            try await hci0.setPairingAgent(nil)
        }
    }

    /// Asks the registered agent, as BlueZ does, whether `device` may use `uuid`; returns whether
    /// it allowed it.
    func authorize(
        _ device: String, _ uuid: String, from connection: DBusConnection, agent: (owner: String, path: DBusObjectPath)
    )
        async throws -> Bool
    {
        do {
            _ = try await connection.call(
                destination: agent.owner, path: agent.path, interface: "org.bluez.Agent1",
                method: "AuthorizeService", arguments: [.objectPath(DBusObjectPath(rawValue: device)!), .string(uuid)])
            return true
        } catch let error as DBusError where error.name.rawValue == "org.bluez.Error.Rejected" {
            return false
        }
    }

    @Test func ableIsTheDefaultAgentOnlyWhileAStandingAgentAsksForIt() async throws {
        try await withAdapters(device: true) { fake, hci0, hci1, _ in
            let asked = Locked<[String]>([])
            try await hci0.setPairingAgent(Self.agent("hci0", accepting: true, asked))
            #expect(fake.agent.value != nil)
            #expect(!fake.agentIsDefault.value)
            try await hci1.setPairingAgent(Self.agent("hci1", accepting: true, asked), asSystemDefault: true)
            #expect(fake.agentIsDefault.value)
            #expect(hci1.pairingAgent != nil)
            // The last default standing agent cleared: registered again, not as the default.
            try await hci1.setPairingAgent(nil)
            #expect(fake.agent.value != nil)
            #expect(!fake.agentIsDefault.value)
            try await hci0.setPairingAgent(nil)
            #expect(fake.agent.value == nil)

            // A pairing alone registers the agent but does not make it the default.
            let peripheral = hci0.peripheral(address: BluetoothAddress(PeripheralTests.address)!)
            try await peripheral.pair(with: Self.agent("pairing", accepting: true, asked))
            #expect(!fake.agentIsDefault.value)
            #expect(asked.value.map { $0.split(separator: " ").first } == ["pairing"])
        }
    }

    @Test func authorizeServiceGoesToTheStandingAgentWhichRefusesByDefault() async throws {
        try await withAdapters { fake, hci0, hci1, _ in
            let asked = Locked<[String]>([])
            let allowing = PairingAgent(
                capability: .displayYesNo, confirm: { _, _ in true },
                authorizeService: { device, service in
                    asked.value.append("\(device) \(service)")
                    return true
                })
            try await hci0.setPairingAgent(allowing)
            try await hci1.setPairingAgent(.justWorks)
            let agent = try #require(fake.agent.value)
            let uuid = "0000180d-0000-1000-8000-00805f9b34fb"
            #expect(
                try await authorize("/org/bluez/hci0/dev_00_11_22_33_44_55", uuid, from: fake.connection, agent: agent))
            #expect(asked.value == ["00:11:22:33:44:55 \(BluetoothUUID(uuid16: 0x180D))"])
            // .justWorks confirms pairing but authorizes no service.
            #expect(
                try await !authorize("/org/bluez/hci1/dev_00_11_22_33_44_66", uuid, from: fake.connection, agent: agent)
            )
            // Without a standing agent on the device's adapter: refused.
            try await hci1.setPairingAgent(nil)
            #expect(
                try await !authorize("/org/bluez/hci1/dev_00_11_22_33_44_66", uuid, from: fake.connection, agent: agent)
            )
            #expect(asked.value.count == 1)
            try await hci0.setPairingAgent(nil)
        }
    }

    @Test func aPairingsAgentIsNotAskedAboutAnotherDevice() async throws {
        try await withAdapters { fake, hci0, _, _ in
            let asked = Locked<[String]>([])
            try await fake.connection.export(
                [DBusInterface("org.bluez.Device1", properties: [.constant("Address", "00:11:22:33:44:55")])],
                at: fake.devicePath(PeripheralTests.address, on: "hci0"))
            // A pairing that holds on: its device's Pair waits for the test.
            let other = "/org/bluez/hci1/dev_00_AA_01_00_00_00"
            let release = Locked(false)
            try await fake.connection.export(
                [
                    DBusInterface(
                        "org.bluez.Device1",
                        methods: [
                            DBusMethod("Pair") { _ in
                                while !release.value { try await Task.sleep(for: .milliseconds(5)) }
                                return []
                            }
                        ], properties: [.constant("Address", "00:11:22:33:44:66")])
                ], at: fake.devicePath("00:11:22:33:44:66", on: "hci0"))
            let peripheral = hci0.peripheral(address: BluetoothAddress("00:11:22:33:44:66"))
            let pairing = Task { try await peripheral.pair(with: Self.agent("pairing", accepting: true, asked)) }
            try await waitUntil { fake.agent.value != nil }
            let agent = try #require(fake.agent.value)
            // The device being paired: the pairing's agent answers.
            #expect(try await confirm("/org/bluez/hci0/dev_00_11_22_33_44_66", from: fake.connection, agent: agent))
            // Another device, on this adapter or the other (the other side of a pairing between
            // two adapters of one bluetoothd), with no standing agent: refused, nobody asked.
            #expect(try await !confirm("/org/bluez/hci0/dev_00_11_22_33_44_55", from: fake.connection, agent: agent))
            #expect(try await !confirm(other, from: fake.connection, agent: agent))
            #expect(asked.value == ["pairing 00:11:22:33:44:66 42"])
            release.value = true
            try await pairing.value
        }
    }
}
