import AbleCore
public import Testing

/// The standing pairing agent (issue 16, part 4): both roles Able, a central reading and writing
/// encrypted characteristics of a server, each adapter with its own standing agent. Written once,
/// run on the simulated radio and on real BlueZ alike.
public enum PairingScenario: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case encryptedAccessPairsWhenTheAgentsAccept
    case encryptedAccessFailsWhenThePeripheralsAgentRefuses
    case authenticatedAccessFailsWithoutInputOrOutput
    case anUnrelatedDevicesRequestDuringAPairingIsRefused

    public var testDescription: String { rawValue }

    /// Runs the scenario on `backend`, then the backend's tear-down.
    public func run(on backend: some ScenarioBackend) async throws {
        try await withCleanup {
            switch self {
            case .encryptedAccessPairsWhenTheAgentsAccept: try await Self.accepted(backend)
            case .encryptedAccessFailsWhenThePeripheralsAgentRefuses: try await Self.refused(backend)
            case .authenticatedAccessFailsWithoutInputOrOutput: try await Self.unauthenticated(backend)
            case .anUnrelatedDevicesRequestDuringAPairingIsRefused: try await Self.unrelated(backend)
            }
        } cleanup: {
            do {
                try await backend.tearDown()
            } catch {
                Issue.record(error, "tearing down after \(self)")
            }
        }
    }

    /// What the agents were asked: the side, the device and the passkey.
    struct Request: Sendable, Equatable, CustomStringConvertible {
        var side: String
        var device: BluetoothAddress
        var passkey: UInt32
        var description: String { "\(side) asked about \(device) (\(passkey))" }
    }

    static func agent(
        _ side: String, accepting: Bool, _ requests: Recorder<Request>,
        capability: PairingAgent.Capability = .displayYesNo
    ) -> PairingAgent {
        PairingAgent(capability: capability) { device, passkey in
            requests.append(Request(side: side, device: device, passkey: passkey))
            return accepting
        }
    }

    /// A server with a plain characteristic and one that needs encryption to read and to write,
    /// whose handlers record each call.
    static func definition(
        _ service: BluetoothUUID, plain: BluetoothUUID, secret: BluetoothUUID, calls: Recorder<String>
    ) -> GATTServerDefinition {
        GATTServerDefinition {
            Service(service) {
                Characteristic(plain, properties: [.read], value: [0x01])
                Characteristic(
                    secret, properties: [.read, .write], permissions: [.readEncrypted, .writeEncrypted], value: [0x5E])
            }
            OnRead(CharacteristicID(secret, service: service), answering: .immediately) { request in
                calls.append("read")
                return request.storedValue
            }
            OnWrite(CharacteristicID(secret, service: service), answering: .immediately) { request in
                calls.append("write \(request.value)")
                return .store
            }
        }
    }

    static func accepted(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let plain = CharacteristicID(.random(), service: service)
        let secret = CharacteristicID(.random(), service: service)
        let calls = Recorder<String>()
        let requests = Recorder<Request>()
        let centralAddress = try #require(await backend.central.state.address)
        let peripheralAddress = try #require(await backend.peripheral.state.address)
        try await backend.peripheral.withPairingAgent(
            agent("peripheral", accepting: true, requests), asSystemDefault: true
        ) {
            try await backend.central.withPairingAgent(
                agent("central", accepting: true, requests), asSystemDefault: true
            ) {
                #expect(backend.central.pairingAgent != nil)
                let definition = definition(service, plain: plain.uuid, secret: secret.uuid, calls: calls)
                try await Scenario.withConnection(backend, serving: definition, advertising: service) {
                    server, peripheral in
                    #expect(await !peripheral.isPaired)
                    #expect(try await peripheral.read(plain) == [0x01])
                    #expect(requests.all.isEmpty, "an unprotected read needs no pairing: \(requests.all)")
                    // The server answers Insufficient Encryption; the central pairs and reads again.
                    #expect(try await peripheral.read(secret) == [0x5E])
                    try await backend.eventually("the central to be paired") { await peripheral.isPaired }
                    try await peripheral.write([0x42], to: secret)
                    #expect(await server.value(of: secret) == [0x42])
                    #expect(try await peripheral.read(secret) == [0x42])
                    #expect(calls.all == ["read", "write [66]", "read"])
                    // The server's agent answered for the peripheral's side, about the central.
                    let asked = requests.all
                    #expect(asked.contains { $0.side == "peripheral" && $0.device == centralAddress }, "\(asked)")
                    #expect(
                        asked.allSatisfy { $0.device == ($0.side == "peripheral" ? centralAddress : peripheralAddress) }
                    )
                    // Numeric comparison (both DisplayYesNo): both sides confirm the same number.
                    if let central = asked.first(where: { $0.side == "central" }) {
                        #expect(asked.filter { $0.side == "peripheral" }.map(\.passkey) == [central.passkey])
                    }
                    try await peripheral.disconnect()
                    try await peripheral.forget()
                    try? await backend.peripheral.peripheral(address: centralAddress).forget()
                }
            }
        }
        #expect(backend.central.pairingAgent == nil)
        #expect(backend.peripheral.pairingAgent == nil)
    }

    static func refused(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let plain = CharacteristicID(.random(), service: service)
        let secret = CharacteristicID(.random(), service: service)
        let calls = Recorder<String>()
        let requests = Recorder<Request>()
        let centralAddress = try #require(await backend.central.state.address)
        try await backend.peripheral.withPairingAgent(
            agent("peripheral", accepting: false, requests), asSystemDefault: true
        ) {
            try await backend.central.withPairingAgent(
                agent("central", accepting: true, requests), asSystemDefault: true
            ) {
                let definition = definition(service, plain: plain.uuid, secret: secret.uuid, calls: calls)
                try await Scenario.withConnection(backend, serving: definition, advertising: service) {
                    server, peripheral in
                    #expect(try await peripheral.read(plain) == [0x01])
                    // The server answers Insufficient Encryption, the central's BlueZ pairs, the
                    // server's agent refuses (SMP Numeric Comparison Failed) and the central's
                    // kernel drops the link (Authentication Failure): BlueZ fails the read as the
                    // link going down, never with the server's security error (its ATT layer
                    // retried the read after raising the link's security).
                    let read = await #expect(throws: BluetoothError.self) { try await peripheral.read(secret) }
                    #expect(read?.code == .disconnected, "\(String(describing: read))")
                    #expect(requests.all.contains { $0.side == "peripheral" && $0.device == centralAddress })
                    #expect(await !peripheral.isPaired)
                    try await backend.eventually("the link to be down") { await !peripheral.isConnected }
                    try await peripheral.connect(timeout: backend.connectTimeout)
                    #expect(try await peripheral.read(plain) == [0x01])
                    let write = await #expect(throws: BluetoothError.self) {
                        try await peripheral.write([0x42], to: secret)
                    }
                    #expect(write?.code == .disconnected, "\(String(describing: write))")
                    #expect(requests.all.filter { $0.side == "peripheral" }.count == 2, "\(requests.all)")
                    // Nothing reached the server's handlers, nothing changed there.
                    #expect(calls.all == [])
                    #expect(await server.value(of: secret) == [0x5E])
                    #expect(await !peripheral.isPaired)
                    #expect(await !backend.peripheral.peripheral(address: centralAddress).isPaired)
                }
            }
        }
    }

    static func unauthenticated(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let guarded = CharacteristicID(.random(), service: service)
        let calls = Recorder<String>()
        let requests = Recorder<Request>()
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(
                    guarded.uuid, properties: [.read], permissions: [.readEncryptedAuthenticated], value: [7])
            }
            OnRead(guarded, answering: .immediately) { request in
                calls.append("read")
                return request.storedValue
            }
        }
        let peripheralAgent = agent("peripheral", accepting: true, requests, capability: .noInputNoOutput)
        let centralAgent = agent("central", accepting: true, requests, capability: .noInputNoOutput)
        try await backend.peripheral.withPairingAgent(peripheralAgent, asSystemDefault: true) {
            try await backend.central.withPairingAgent(centralAgent, asSystemDefault: true) {
                try await Scenario.withConnection(backend, serving: definition, advertising: service) { _, peripheral in
                    // Neither side can show or type a number. The server answers Insufficient
                    // Authentication; the central's BlueZ raises the link's security to
                    // encryption, with Just Works (the server's agent authorizes it), and retries.
                    let read = await #expect(throws: BluetoothError.self) { try await peripheral.read(guarded) }
                    let centralAddress = try #require(await backend.central.state.address)
                    #expect(requests.all == [Request(side: "peripheral", device: centralAddress, passkey: 0)])
                    // The Just Works keys stay.
                    #expect(await peripheral.isPaired)
                    if let version = backend.bluezVersion, version < (5, 82) {
                        // BlueZ 5.66 raises the security once more, to pairing with MITM, which
                        // fails before anyone is asked (Authentication Requirements): the link drops.
                        #expect(read?.code == .disconnected, "\(String(describing: read))")
                    } else {
                        // BlueZ 5.82 raises it once per request: the retry's Insufficient
                        // Authentication stands, and the link stays up.
                        #expect(read?.code == .notPermitted, "\(String(describing: read))")
                        #expect(read?.message == "Not paired")
                        #expect(await peripheral.isConnected)
                        try await peripheral.disconnect()
                    }
                    #expect(calls.all == [])
                    try await backend.eventually("the link to be down") { await !peripheral.isConnected }
                    try await peripheral.forget()
                }
            }
        }
    }

    /// A pairing's agent answers only for the device it pairs with. The central pairs with the
    /// server's adapter through ``Peripheral/pair(with:timeout:)``; Able is the system's default
    /// agent (the central's standing agent asked for it), so the other side's request reaches it
    /// too: on real BlueZ both adapters belong to one `bluetoothd`, which asks its one default
    /// agent about the central's address on the server's adapter. That device is not the one being
    /// paired, and the server's adapter has no standing agent: the request is refused, so the
    /// pairing fails, and neither the pairing's agent nor the central's standing agent is asked
    /// about it. (Before, the pairing under way answered every request and the pairing succeeded.)
    static func unrelated(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let plain = CharacteristicID(.random(), service: service)
        let requests = Recorder<Request>()
        let peripheralAddress = try #require(await backend.peripheral.state.address)
        let centralAddress = try #require(await backend.central.state.address)
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(plain.uuid, properties: [.read], value: [0x01]) }
        }
        try await backend.central.withPairingAgent(agent("standing", accepting: true, requests), asSystemDefault: true)
        {
            #expect(backend.peripheral.pairingAgent == nil)
            try await Scenario.withConnection(backend, serving: definition, advertising: service) { _, peripheral in
                // BlueZ fails `Pair` as the kernel reports the refusal (Numeric Comparison Failed:
                // AuthenticationFailed) or, when the link drops first, as AuthenticationCanceled.
                let pairing = await #expect(throws: BluetoothError.self) {
                    try await peripheral.pair(with: agent("pairing", accepting: true, requests))
                }
                #expect(
                    [.authenticationRejected, .authenticationFailed, .authenticationCanceled].contains(pairing?.code),
                    "\(String(describing: pairing))")
                #expect(await !peripheral.isPaired)
                #expect(await !backend.peripheral.peripheral(address: centralAddress).isPaired)
                // Whoever was asked was asked about the peripheral being paired, by the pairing.
                #expect(
                    requests.all.allSatisfy { $0.side == "pairing" && $0.device == peripheralAddress },
                    "\(requests.all)")
                try? await peripheral.disconnect()
                try? await peripheral.forget()
                try? await backend.peripheral.peripheral(address: centralAddress).forget()
            }
        }
        #expect(backend.central.pairingAgent == nil)
    }
}
