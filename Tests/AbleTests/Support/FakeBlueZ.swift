import AbleDBus
import AbleTestSupport

/// A stand-in for `bluetoothd` on a private bus: it owns `org.bluez` and exports adapters with
/// the `org.bluez.Adapter1` properties Able reads, under an object manager at `/`.
final class FakeBlueZ: Sendable {
    let connection: DBusConnection
    private let adapters: [String: Locked<[String: DBusValue]>]

    static func start(on bus: PrivateBus, adapters names: [String] = ["hci0", "hci1"]) async throws -> FakeBlueZ {
        let connection = try await bus.connect()
        var adapters: [String: Locked<[String: DBusValue]>] = [:]
        for (index, name) in names.enumerated() {
            adapters[name] = Locked([
                "Address": .string("00:AA:01:0\(index):00:0\(index)"), "Name": .string("fake-\(name)"),
                "Alias": .string("fake-\(name)"), "Powered": .boolean(true), "Discoverable": .boolean(false),
                "Pairable": .boolean(true), "Discovering": .boolean(false),
            ])
        }
        let fake = FakeBlueZ(connection: connection, adapters: adapters)
        try await fake.export()
        try await connection.requestName("org.bluez")
        return fake
    }

    private init(connection: DBusConnection, adapters: [String: Locked<[String: DBusValue]>]) {
        self.connection = connection
        self.adapters = adapters
    }

    private func export() async throws {
        try await connection.exportObjectManager(at: .root)
        for (name, properties) in adapters {
            let path = DBusObjectPath(rawValue: "/org/bluez/\(name)")!
            let declared = properties.value.keys.sorted().map { key in
                let writable = ["Powered", "Discoverable", "Pairable", "Alias"].contains(key)
                let set: (@Sendable (String, DBusValue) throws -> Void)? =
                    writable ? { @Sendable _, value in properties.value[key] = value } : nil
                return DBusProperty(
                    key, signature: properties.value[key]!.signature, get: { properties.value[key]! }, set: set)
            }
            try await connection.export([DBusInterface("org.bluez.Adapter1", properties: declared)], at: path)
        }
    }

    /// Changes a property without telling anyone, as no real BlueZ would.
    func changeSilently(_ adapter: String, _ name: String, to value: DBusValue) {
        adapters[adapter]!.value[name] = value
    }

    /// Changes a property as BlueZ would, announcing it with `PropertiesChanged`.
    func change(_ adapter: String, _ name: String, to value: DBusValue) {
        adapters[adapter]!.value[name] = value
        connection.emitPropertiesChanged(
            path: DBusObjectPath(rawValue: "/org/bluez/\(adapter)")!, interface: "org.bluez.Adapter1",
            changed: [name: value])
    }
}
