import Able
import AbleScenarios
import AbleSimulator
import Testing

/// The scoped calls run their body where the caller is: these bodies touch state of the caller's
/// actor without `await` and return values that are not `Sendable`, which compiles only when the
/// body stays on that actor, and `assertIsolated()` checks it at run time too.
@Suite(.timeLimit(.minutes(1)))
struct ScopedCallIsolationTests {
    /// Not `Sendable`: only one isolation domain may hold it.
    final class Notes {
        var values: [[UInt8]] = []
    }

    /// A user's own actor, holding what its scoped calls produce.
    actor Client {
        private(set) var values: [[UInt8]] = []
        private(set) var server: GATTServer?

        func readA1(on adapter: Adapter, from discovery: Discovery) async throws -> sending Notes {
            try await adapter.withConnection(to: discovery) { peripheral in
                self.assertIsolated()
                let value = try await peripheral.read(SeedCharacteristic.a1)
                values.append(value)
                let notes = Notes()
                notes.values.append(value)
                return notes
            }
        }

        func serve(on adapter: Adapter) async throws -> sending Notes {
            let definition = GATTServerDefinition {
                Service(SeedService.a) {
                    Characteristic(SeedCharacteristic.a1, properties: .read, value: [0x41])
                }
            }
            return try await adapter.withGATTServer(definition) { server in
                self.assertIsolated()
                self.server = server
                let value = await server.value(of: SeedCharacteristic.a1)
                let notes = Notes()
                notes.values.append(value ?? [])
                return notes
            }
        }
    }

    static func seededAdapter(on radio: SimulatedRadio) async throws -> (Adapter, Discovery) {
        radio.addPeripheral(
            address: "00:00:00:00:00:01",
            advertisement: Advertisement(localName: "seed", serviceUUIDs: [SeedService.a.uuid])
        ) {
            Service(SeedService.a) {
                Characteristic(SeedCharacteristic.a1, properties: .read, value: [0x41])
            }
        }
        let adapter = radio.makeAdapter()
        let discovery = try await adapter.scan(ScanFilter(serviceUUIDs: [SeedService.a.uuid])).first(
            timeout: .seconds(3))
        return (adapter, discovery)
    }

    @Test @MainActor func withConnectionRunsItsBodyOnTheMainActorItWasCalledFrom() async throws {
        let radio = SimulatedRadio()
        // Called on the main actor, the body stays there; what it calls runs on the radio.
        try await radio.run {
            let (adapter, discovery) = try await Self.seededAdapter(on: radio)
            let notes = Notes()
            let returned = try await adapter.withConnection(to: discovery) { peripheral in
                MainActor.assertIsolated()
                let value = try await peripheral.read(SeedCharacteristic.a1)
                notes.values.append(value)
                let returned = Notes()
                returned.values = [value]
                return returned
            }
            #expect(notes.values == [[0x41]])
            #expect(returned.values == [[0x41]])
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func withConnectionRunsItsBodyOnTheCallersActor() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let (adapter, discovery) = try await Self.seededAdapter(on: radio)
            let client = Client()
            let values = try await client.readA1(on: adapter, from: discovery).values
            #expect(values == [[0x41]])
            #expect(await client.values == [[0x41]])
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func withGATTServerRunsItsBodyOnTheCallersActorAndClosesTheServer() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let client = Client()
            let values = try await client.serve(on: radio.makeAdapter()).values
            #expect(values == [[0x41]])
            let server = try #require(await client.server)
            #expect(await !server.isOpen)
            #expect(radio.openResources.isEmpty)
        }
    }
}
