import Able
import AbleDBus
import AbleTestSupport
import Testing

@testable import AbleBlueZ

/// Adapters that come and go and the devices an adapter knows, against a fake BlueZ.
@Suite(.timeLimit(.minutes(1)))
struct LifecycleTests {
    func withFakeBlueZ(_ body: (FakeBlueZ, DBusConnection) async throws -> Void) async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        try await body(fake, try await bus.connect())
    }

    @Test func adapterEventsListTheAdaptersThenFollowOneGoingAway() async throws {
        try await withFakeBlueZ { fake, connection in
            let directory = try await Adapter.bluezDirectory(on: connection)
            #expect(directory.adapters().map(\.name) == ["hci0", "hci1"])
            var events = directory.adapterEvents().makeAsyncIterator()
            #expect(await events.next()?.description == "added hci0")
            #expect(await events.next()?.description == "added hci1")
            let hci1 = Adapter(backend: directory.adapters()[1])
            await fake.connection.unexport("/org/bluez/hci1")
            #expect(await events.next()?.description == "removed hci1")
            #expect(directory.adapters().map(\.name) == ["hci0"])
            #expect(await !hci1.state.isPresent)
            let error = await #expect(throws: BluetoothError.self) { try await hci1.setAlias("gone") }
            #expect(error?.code == .adapterRemoved)
            let timedOut = await #expect(throws: BluetoothError.self) {
                try await hci1.waitUntilPowered(timeout: .milliseconds(200))
            }
            #expect(timedOut?.code == .timeout)
        }
    }

    @Test func knownPeripheralsFollowTheDeviceObjectsOfTheAdapter() async throws {
        try await withFakeBlueZ { fake, connection in
            let adapter = try await Adapter.bluez(named: "hci0", on: connection)
            #expect(try await adapter.knownPeripherals().isEmpty)
            var events = try await adapter.knownPeripheralEvents().makeAsyncIterator()
            try await fake.addDevice("00:11:22:33:44:01", name: "thermo")
            try await fake.addDevice("00:11:22:33:44:02", on: "hci1", name: "other adapter's")
            guard case .added(let added)? = await events.next() else {
                Issue.record("no addition")
                return
            }
            #expect(added.address == "00:11:22:33:44:01")
            #expect(added.addressType == .public)
            #expect(!added.isPaired && !added.isBonded && !added.isTrusted && !added.isBlocked && !added.isConnected)
            #expect(try await adapter.knownPeripherals().map(\.address) == ["00:11:22:33:44:01"])
            await fake.connection.unexport(fake.devicePath("00:11:22:33:44:01", on: "hci0"))
            #expect(await events.next() == .removed("00:11:22:33:44:01"))
        }
    }

    @Test func connectingToAnAddressBlueZDoesNotKnowScansForItWithinTheTimeout() async throws {
        try await withFakeBlueZ { fake, connection in
            let adapter = try await Adapter.bluez(named: "hci0", on: connection)
            let error = await #expect(throws: BluetoothError.self) {
                try await adapter.peripheral(address: "00:11:22:33:44:09").connect(timeout: .milliseconds(300))
            }
            #expect(error?.code == .timeout)
            #expect(fake.discoveryCalls.value.contains("StartDiscovery"))
            try await waitUntil { fake.discoveryCalls.value.last == "SetDiscoveryFilter" }
            #expect(fake.discoveryCalls.value.contains("StopDiscovery"))
        }
    }
}
