import Able
import AbleDBus
import AbleTestSupport
import Foundation
import Testing

@testable import AbleBlueZ

/// `bluetoothd` restarting under a GATT server and an advertising set, on the fake BlueZ: the
/// old daemon leaves the bus (its registrations with it), a new one takes `org.bluez` and
/// exports the adapters again, and Able's objects register with it by themselves.
@Suite(.timeLimit(.minutes(1)))
struct DaemonRestartTests {
    static let service: BluetoothUUID = "3E0A0001-7E3D-4B1A-9C55-0A1B2C3D4E5F"
    static let level = CharacteristicID("3E0A0002-7E3D-4B1A-9C55-0A1B2C3D4E5F", service: service)

    @Test func aServerAndAnAdvertisementRegisterAgainWithTheNewDaemonAndTheServerReportsTheGap() async throws {
        let bus = try PrivateBus()
        let first = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let adapter = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci1", system: system))
        let changes = Locked<[String]>([])
        let server = try await GATTServer.start(on: adapter) {
            Service(Self.service) { Characteristic(Self.level.uuid, properties: [.read, .notify], value: [1]) }
            OnServingChange { _, change in
                changes.value.append(change.isServing ? "serving" : "gap \(change.reason?.code.description ?? "")")
            }
        }
        let advertising = try await adapter.startAdvertising(
            Advertisement(localName: "restart", serviceUUIDs: [Self.service]))
        let ourName = try #require(first.application.value?.owner)
        #expect(first.advertisement.value?.owner == ourName)
        #expect(await server.isServing)

        // bluetoothd stops: it releases the advertisement, then its connection and its name go.
        let registered = try #require(first.advertisement.value)
        _ = try await first.connection.call(
            destination: registered.owner, path: registered.path, interface: "org.bluez.LEAdvertisement1",
            method: "Release")
        await first.connection.close()
        try await waitUntil { changes.value == ["gap daemonUnavailable"] }
        #expect(await !server.isServing)
        #expect(await server.isOpen, "the server stays open through the gap")
        #expect(await advertising.isActive)

        // A new bluetoothd takes the name and exports the adapters again.
        let second = try await FakeBlueZ.start(on: bus)
        try await waitUntil {
            second.application.value != nil && second.advertisement.value != nil
        }
        #expect(second.application.value?.owner == ourName)
        #expect(second.application.value?.objects.isEmpty == false, "the new daemon read the application's objects")
        #expect(second.advertisement.value?.owner == ourName)
        #expect(await advertising.isActive, "a release on the way out is not the set's end")
        #expect(try second.advertisement.value?.properties.decode("LocalName", as: String.self) == "restart")
        // The handler runs after `isServing` changed, in the server's event order.
        try await waitUntil { changes.value.count == 2 }
        #expect(changes.value == ["gap daemonUnavailable", "serving"])
        #expect(await server.isServing)

        // Only the new daemon may call the application's objects: the daemon's unique name
        // changed, and the application follows it.
        let root = try #require(second.application.value?.root)
        let reply = try await second.connection.call(
            destination: ourName, path: root, interface: "org.freedesktop.DBus.ObjectManager",
            method: "GetManagedObjects")
        #expect(!reply.isEmpty)

        await advertising.stop()
        await server.close()
        #expect(second.application.value == nil, "closing unregisters from the new daemon")
        #expect(second.advertisement.value == nil)
        await second.connection.close()
    }
}
