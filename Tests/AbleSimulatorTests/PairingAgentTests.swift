import Able
import AbleIO
import AbleSimulator
import Testing

/// The standing pairing agent on the simulated radio: which agent is asked what, by capability,
/// and what a central sees of a server's protected characteristics.
@Suite(.timeLimit(.minutes(1)))
struct PairingAgentTests {
    let radio = SimulatedRadio()
    let central: Adapter
    let server: Adapter
    let service = BluetoothUUID("9A3C0001-0000-1000-8000-00805F9B34FB")
    let encrypted = BluetoothUUID("9A3C0002-0000-1000-8000-00805F9B34FB")
    let authenticated = BluetoothUUID("9A3C0003-0000-1000-8000-00805F9B34FB")

    var encryptedID: CharacteristicID { CharacteristicID(encrypted, service: service) }
    var authenticatedID: CharacteristicID { CharacteristicID(authenticated, service: service) }

    init() {
        central = radio.makeAdapter(name: "hci0")
        server = radio.makeAdapter(name: "hci1")
    }

    var definition: GATTServerDefinition {
        GATTServerDefinition {
            Service(service) {
                Characteristic(
                    encrypted, properties: [.read, .writeWithoutResponse],
                    permissions: [.readEncrypted, .writeEncrypted], value: [1])
                Characteristic(
                    authenticated, properties: [.read], permissions: [.readEncryptedAuthenticated], value: [2])
            }
        }
    }

    /// What the agents were told and asked, in order.
    final class Log: Sendable {
        private let entries = Lock<[String]>([])
        func append(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    static func agent(
        _ side: String, _ capability: PairingAgent.Capability, _ log: Log, accepting: Bool = true,
        passkey: (@Sendable () -> UInt32?)? = nil
    ) -> PairingAgent {
        PairingAgent(
            capability: capability,
            confirm: { _, key in
                log.append("\(side) confirm \(key)")
                return accepting
            },
            passkey: { _ in
                log.append("\(side) passkey")
                return passkey?()
            },
            display: { _, key in log.append("\(side) display \(key)") })
    }

    /// Serves the definition on `server` and runs `body` with a connected peripheral of `central`.
    func connected(_ body: (Peripheral, GATTServer) async throws -> Void) async throws {
        let gattServer = try await GATTServer.start(on: server, definition: definition)
        let address = try #require(await server.state.address)
        let peripheral = central.peripheral(address: address)
        try await peripheral.connect()
        try await body(peripheral, gattServer)
        try await peripheral.disconnect()
        await gattServer.close()
        #expect(radio.openResources == [])
    }

    @Test func theStandingAgentIsSetClearedAndGoesWithItsAdapter() async throws {
        try await radio.run {
            #expect(server.pairingAgent == nil)
            try await server.setPairingAgent(.justWorks)
            #expect(server.pairingAgent?.capability == .displayYesNo)
            try await server.setPairingAgent(nil)
            #expect(server.pairingAgent == nil)
            try await server.withPairingAgent(.justWorks) {
                #expect(server.pairingAgent != nil)
            }
            #expect(server.pairingAgent == nil)

            try await server.setPairingAgent(.justWorks)
            radio.removeAdapter(named: "hci1")
            let refused = await #expect(throws: BluetoothError.self) { try await server.setPairingAgent(.justWorks) }
            #expect(refused?.code == .adapterRemoved)
            let returned = radio.makeAdapter(name: "hci1")
            #expect(returned.pairingAgent == nil)
        }
    }

    @Test func numericComparisonAsksBothSidesTheSameNumber() async throws {
        try await radio.run {
            let log = Log()
            try await server.setPairingAgent(Self.agent("server", .displayYesNo, log), asSystemDefault: true)
            try await central.setPairingAgent(Self.agent("central", .keyboardDisplay, log), asSystemDefault: true)
            try await connected { peripheral, _ in
                let authenticatedIDValue = try await peripheral.read(authenticatedID)
                #expect(authenticatedIDValue == [2])
                #expect(await peripheral.isPaired)
                // Paired once: the other protected characteristic needs nothing more.
                let encryptedIDValue = try await peripheral.read(encryptedID)
                #expect(encryptedIDValue == [1])
            }
            let entries = log.all
            #expect(entries.count == 2, "\(entries)")
            #expect(entries.first?.hasPrefix("central confirm ") == true)
            #expect(entries.last?.hasPrefix("server confirm ") == true)
            #expect(entries.first?.split(separator: " ").last == entries.last?.split(separator: " ").last)
        }
    }

    @Test func passkeyEntryTakesThePasskeyTheOtherSideShows() async throws {
        try await radio.run {
            let log = Log()
            let shown = Lock<UInt32?>(nil)
            try await server.setPairingAgent(
                PairingAgent(
                    capability: .displayOnly, confirm: { _, _ in false },
                    display: { _, key in shown.withLock { $0 = key } }), asSystemDefault: true)
            try await central.setPairingAgent(
                Self.agent("central", .keyboardOnly, log) { shown.withLock { $0 } }, asSystemDefault: true)
            try await connected { peripheral, _ in
                let authenticatedIDValue = try await peripheral.read(authenticatedID)
                #expect(authenticatedIDValue == [2])
            }
            #expect(log.all == ["central passkey"])
            #expect(shown.withLock { $0 } != nil)
        }
    }

    @Test func aWrongPasskeyFailsWithTheSecurityError() async throws {
        try await radio.run {
            try await server.setPairingAgent(
                PairingAgent(capability: .displayOnly, confirm: { _, _ in false }), asSystemDefault: true)
            try await central.setPairingAgent(
                PairingAgent(capability: .keyboardOnly, confirm: { _, _ in true }, passkey: { _ in 1 }),
                asSystemDefault: true)
            try await connected { peripheral, _ in
                let error = await #expect(throws: BluetoothError.self) {
                    try await peripheral.read(encryptedID)
                }
                // The failed pairing drops the link, as the kernel does.
                #expect(error?.code == .disconnected)
                #expect(await !peripheral.isPaired)
                #expect(await !peripheral.isConnected)
            }
        }
    }

    @Test func justWorksKeysAreTooWeakForAnAuthenticatedCharacteristic() async throws {
        try await radio.run {
            let log = Log()
            try await server.setPairingAgent(Self.agent("server", .noInputNoOutput, log), asSystemDefault: true)
            try await central.setPairingAgent(Self.agent("central", .noInputNoOutput, log), asSystemDefault: true)
            try await connected { peripheral, _ in
                let encryptedIDValue = try await peripheral.read(encryptedID)
                #expect(encryptedIDValue == [1])
                #expect(log.all == ["server confirm 0"])
                let error = await #expect(throws: BluetoothError.self) {
                    try await peripheral.read(authenticatedID)
                }
                // Pairing again cannot give authenticated keys: it fails before anyone is asked,
                // and the link drops, as with the kernel's SMP.
                #expect(error?.code == .disconnected)
                #expect(log.all == ["server confirm 0"])
            }
        }
    }

    @Test func withoutAgentsAServerAdapterRefusesPairing() async throws {
        try await radio.run {
            try await connected { peripheral, _ in
                let error = await #expect(throws: BluetoothError.self) {
                    try await peripheral.read(encryptedID)
                }
                #expect(error?.code == .disconnected)
                #expect(await !peripheral.isPaired)
            }
        }
    }

    @Test func aWriteCommandToAnEncryptedCharacteristicOnAnUnpairedLinkIsDropped() async throws {
        try await radio.run {
            let log = Log()
            try await server.setPairingAgent(Self.agent("server", .displayYesNo, log), asSystemDefault: true)
            try await central.setPairingAgent(Self.agent("central", .displayYesNo, log), asSystemDefault: true)
            try await connected { peripheral, gattServer in
                try await peripheral.write([9], to: encryptedID, type: .withoutResponse)
                try await radio.clock.sleep(for: .seconds(1))
                #expect(await gattServer.value(of: encryptedID) == [1])
                #expect(log.all == [], "a Write Command starts no pairing")
                #expect(await !peripheral.isPaired)
            }
        }
    }

    @Test func aSimulatedPeripheralPairsWithJustWorks() async throws {
        try await radio.run {
            let address: BluetoothAddress = "00:00:00:00:0F:0E"
            radio.addPeripheral(address: address, advertisement: Advertisement(localName: "lock")) {
                Service(service) {
                    Characteristic(encrypted, properties: [.read], permissions: [.readEncrypted], value: [7])
                }
            }
            let log = Log()
            try await central.setPairingAgent(Self.agent("central", .displayYesNo, log), asSystemDefault: true)
            let peripheral = central.peripheral(address: address)
            try await peripheral.connect()
            let encryptedIDValue = try await peripheral.read(encryptedID)
            #expect(encryptedIDValue == [7])
            #expect(await peripheral.isPaired)
            #expect(log.all == [], "Just Works asks the initiator nothing")
            try await peripheral.disconnect()
        }
    }
}
