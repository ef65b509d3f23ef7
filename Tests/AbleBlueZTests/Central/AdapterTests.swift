import Able
import AbleDBus
import AbleTestSupport
import Testing

@testable import AbleBlueZ

@Suite(.timeLimit(.minutes(1)))
struct AdapterTests {
    /// Runs `body` with a fake BlueZ and Able's view of it through a second connection.
    func withFakeBlueZ(_ body: (PrivateBus, FakeBlueZ, BlueZSystem) async throws -> Void) async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        try await body(bus, fake, system)
    }

    func adapter(_ name: String?, _ system: BlueZSystem) async throws -> Adapter {
        Adapter(backend: try await BlueZAdapterBackend.open(name: name, system: system))
    }

    @Test func theDefaultAdapterIsTheFirstAndOthersAreFoundByName() async throws {
        try await withFakeBlueZ { _, _, system in
            #expect(try await adapter(nil, system).name == "hci0")
            let second = try await adapter("hci1", system)
            let state = await second.state
            #expect(state.address == BluetoothAddress("00:AA:01:01:00:01"))
            #expect(state.isPowered && state.isPairable && !state.isDiscovering && state.isPresent)
            #expect(state.alias == "fake-hci1")
            let error = await #expect(throws: BluetoothError.self) { try await adapter("hci7", system) }
            #expect(error?.code == .doesNotExist)
        }
    }

    @Test func stateComesFromTheTrackedTreeNotFromACallPerRead() async throws {
        try await withFakeBlueZ { _, fake, system in
            let hci0 = try await adapter("hci0", system)
            fake.changeSilently("hci0", "Alias", to: .string("unannounced"))
            fake.change("hci0", "Discovering", to: .boolean(true))
            try await waitUntil { await hci0.state.isDiscovering }
            #expect(await hci0.state.alias == "fake-hci0")
        }
    }

    @Test func poweringOffAndOnIsSeenInTheStateStream() async throws {
        try await withFakeBlueZ { _, _, system in
            let hci0 = try await adapter("hci0", system)
            let states = await hci0.stateChanges()
            var iterator = states.makeAsyncIterator()
            #expect(await iterator.next()?.isPowered == true)
            try await hci0.setPowered(false)
            #expect(await iterator.next()?.isPowered == false)
            try await hci0.setPowered(true)
            #expect(await iterator.next()?.isPowered == true)
        }
    }

    @Test func aDaemonThatLeavesAndComesBackIsFollowed() async throws {
        let bus = try PrivateBus()
        let first = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let hci1 = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci1", system: system))
        var states = await hci1.stateChanges().makeAsyncIterator()
        #expect(await states.next()?.isPresent == true)

        await first.connection.close()
        #expect(await states.next()?.isPresent == false)
        let error = await #expect(throws: BluetoothError.self) { try await hci1.setPowered(true) }
        #expect(error?.code == .daemonUnavailable)

        let second = try await FakeBlueZ.start(on: bus)
        #expect(await states.next()?.isPresent == true)
        try await hci1.setAlias("back")
        try await waitUntil { await hci1.state.alias == "back" }
        _ = second
    }

    @Test func writingAPropertyBlueZRefusesThrowsABluetoothError() async throws {
        try await withFakeBlueZ { _, _, system in
            // The fake's Adapter1 has no writable "Class"-like property: a Set of Alias with the
            // wrong type is refused by the D-Bus layer of the fake, as BlueZ refuses bad values.
            let hci0 = try await adapter("hci0", system)
            let error = await #expect(throws: BluetoothError.self) {
                try await system.setProperty("/org/bluez/hci0", "org.bluez.Adapter1", "Alias", .uint32(1))
            }
            #expect(error?.code == .protocolError)
            #expect(await hci0.state.alias == "fake-hci0")
        }
    }
}
