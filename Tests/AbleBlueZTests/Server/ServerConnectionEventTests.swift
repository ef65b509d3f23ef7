import Able
import AbleDBus
import AbleTestSupport
import Testing

@testable import AbleBlueZ

/// `OnConnectionStateChange` on BlueZ: the centrals that connect to the server's adapter, and why
/// their links ended where BlueZ says (`Device1.Disconnected`, 5.83 and later).
@Suite(.timeLimit(.minutes(1)))
struct ServerConnectionEventTests {
    static let central = "11:22:33:44:55:66"

    /// Runs `body` with a fake BlueZ whose hci1 serves a server that records its connection
    /// events, and a device on hci1 that is about to connect to it.
    func withServer(_ body: (FakeBlueZ, DBusObjectPath, Locked<[CentralConnectionChange]>) async throws -> Void)
        async throws
    {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let adapter = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci1", system: system))
        let changes = Locked<[CentralConnectionChange]>([])
        let server = try await GATTServer.start(on: adapter) {
            Service(GATTServerTests.service) { Characteristic(GATTServerTests.stored, properties: [.read], value: [1]) }
            OnConnectionStateChange { _, change in changes.value.append(change) }
        }
        try await fake.addDevice(Self.central, on: "hci1")
        let device = fake.devicePath(Self.central, on: "hci1")
        fake.connection.emitPropertiesChanged(
            path: device, interface: "org.bluez.Device1", changed: ["Connected": .boolean(true)])
        try await waitUntil { changes.value.count == 1 }
        #expect(changes.value.first?.isConnected == true)
        #expect(changes.value.first?.reason == nil)
        try await body(fake, device, changes)
        await server.close()
    }

    /// The link ends, as BlueZ announces it.
    func disconnect(_ fake: FakeBlueZ, _ device: DBusObjectPath) {
        fake.connection.emitPropertiesChanged(
            path: device, interface: "org.bluez.Device1", changed: ["Connected": .boolean(false)])
    }

    @Test(
        "A central's departure carries the reason BlueZ 5.83 announces, in Able's words",
        arguments: [
            ("org.bluez.Reason.Remote", "Connection terminated by remote user", "the central ended the link"),
            ("org.bluez.Reason.Local", "Connection terminated by local host", "this adapter ended the link"),
            ("org.bluez.Reason.Timeout", "Connection timeout", "the link timed out"),
            (
                "org.bluez.Reason.Authentication", "Connection terminated due to authentication failure",
                "authentication failed"
            ),
            ("org.bluez.Reason.Suspend", "Connection terminated by local host for suspend", "this host suspended"),
            ("org.bluez.Reason.Unknown", "Unspecified", "Unspecified"),
            ("org.bluez.Reason.SomethingNew", "", "org.bluez.Reason.SomethingNew"),
        ])
    func reasonFromBlueZ(name: String, message: String, expected: String) async throws {
        try await withServer { fake, device, changes in
            try fake.connection.emitSignal(
                path: device, interface: "org.bluez.Device1", member: "Disconnected",
                arguments: [.string(name), .string(message)])
            disconnect(fake, device)
            try await waitUntil { changes.value.count == 2 }
            #expect(
                changes.value.last
                    == CentralConnectionChange(
                        central: Central(address: BluetoothAddress(Self.central)!), isConnected: false, reason: expected
                    ))
        }
    }

    @Test func withoutAnAnnouncementAsBefore583TheReasonIsNil() async throws {
        try await withServer { fake, device, changes in
            disconnect(fake, device)
            try await waitUntil { changes.value.count == 2 }
            #expect(changes.value.last?.isConnected == false)
            #expect(changes.value.last?.reason == nil)
        }
    }

    @Test func aMalformedAnnouncementIsIgnoredAndAStaleReasonIsDropped() async throws {
        try await withServer { fake, device, changes in
            try fake.connection.emitSignal(
                path: device, interface: "org.bluez.Device1", member: "Disconnected", arguments: [.uint32(19)])
            disconnect(fake, device)
            try await waitUntil { changes.value.count == 2 }
            #expect(changes.value.last?.reason == nil)
            // A reason announced before a central connects again says nothing of its next departure.
            try fake.connection.emitSignal(
                path: device, interface: "org.bluez.Device1", member: "Disconnected",
                arguments: [.string("org.bluez.Reason.Timeout"), .string("Connection timeout")])
            fake.connection.emitPropertiesChanged(
                path: device, interface: "org.bluez.Device1", changed: ["Connected": .boolean(true)])
            disconnect(fake, device)
            try await waitUntil { changes.value.count == 4 }
            #expect(changes.value.map(\.reason) == [nil, nil, nil, nil])
        }
    }
}
