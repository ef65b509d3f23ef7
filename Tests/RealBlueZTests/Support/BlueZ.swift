import AbleDBus
import Testing

/// The names of BlueZ's D-Bus API (`doc/org.bluez.*`) that these tests use.
enum BlueZ {
    static let service = "org.bluez"
    static let adapter1 = "org.bluez.Adapter1"
    static let device1 = "org.bluez.Device1"
    static let leAdvertisingManager1 = "org.bluez.LEAdvertisingManager1"
    static let leAdvertisement1 = "org.bluez.LEAdvertisement1"

    static let properties = "org.freedesktop.DBus.Properties"
    static let objectManager = "org.freedesktop.DBus.ObjectManager"

    /// The object of an adapter such as `hci0`.
    static func adapterPath(_ adapter: String) -> DBusObjectPath {
        DBusObjectPath.root.appending("org")!.appending("bluez")!.appending(adapter)!
    }

    /// Whether `text` has the form BlueZ gives addresses: six upper-case hex pairs joined by colons.
    static func isWellFormedAddress(_ text: String) -> Bool {
        text.wholeMatch(of: /[0-9A-F]{2}(:[0-9A-F]{2}){5}/) != nil
    }
}

extension DBusConnection {
    /// Calls a method of a `bluetoothd` object.
    @discardableResult
    func callBlueZ(
        _ path: DBusObjectPath, _ interface: String, _ method: String, _ arguments: [DBusValue] = [],
        timeout: Duration = .seconds(25)
    ) async throws -> [DBusValue] {
        try await call(
            destination: BlueZ.service, path: path, interface: interface, method: method, arguments: arguments,
            timeout: timeout)
    }

    /// Reads one property with `org.freedesktop.DBus.Properties.Get`.
    func bluezProperty<T: DBusRepresentable>(
        _ name: String, of interface: String, at path: DBusObjectPath, as type: T.Type = T.self
    ) async throws -> T {
        let reply = try await callBlueZ(path, BlueZ.properties, "Get", [.string(interface), .string(name)])
        return try #require(reply.first).decode(DBusVariant.self).decode(T.self)
    }

    /// Writes one property with `org.freedesktop.DBus.Properties.Set`.
    func setBlueZProperty(
        _ name: String, of interface: String, at path: DBusObjectPath, to value: some DBusRepresentable
    ) async throws {
        try await callBlueZ(
            path, BlueZ.properties, "Set", [.string(interface), .string(name), .variant(value.dbusValue)])
    }

    /// The whole object tree of `bluetoothd` (`org.freedesktop.DBus.ObjectManager.GetManagedObjects` on `/`).
    func bluezObjects(timeout: Duration = .seconds(25)) async throws -> ObjectTree {
        let reply = try await callBlueZ(.root, BlueZ.objectManager, "GetManagedObjects", timeout: timeout)
        return ObjectTree(try #require(reply.first).decode(ObjectTree.Objects.self))
    }

    /// Sets a discovery filter on `adapter`, starts discovery, runs `body`, then stops discovery
    /// whatever happens.
    ///
    /// The corresponding BlueZ methods are `org.bluez.Adapter1.SetDiscoveryFilter`,
    /// `StartDiscovery` and `StopDiscovery`.
    nonisolated func withDiscovery<T>(
        on adapter: String, filter: [String: DBusVariant], _ body: () async throws -> T
    ) async throws -> T {
        let path = BlueZ.adapterPath(adapter)
        try await callBlueZ(path, BlueZ.adapter1, "SetDiscoveryFilter", [filter.dbusValue])
        try await callBlueZ(path, BlueZ.adapter1, "StartDiscovery")
        return try await withCleanup(body) {
            do {
                try await self.callBlueZ(path, BlueZ.adapter1, "StopDiscovery")
            } catch {
                Issue.record(error, "could not stop discovery on \(adapter)")
            }
        }
    }

    /// Removes every device object of `adapter` whose address is `address`, ignoring failures.
    ///
    /// The corresponding BlueZ method is `org.bluez.Adapter1.RemoveDevice`.
    func removeDevices(of adapter: String, address: String) async {
        let path = BlueZ.adapterPath(adapter)
        guard let tree = try? await bluezObjects() else { return }
        for device in tree.devices(of: path, address: address).keys {
            _ = try? await callBlueZ(path, BlueZ.adapter1, "RemoveDevice", [.objectPath(device)])
        }
    }

    /// Subscribes to every signal `bluetoothd` sends: object tree changes and property changes.
    func bluezSignals() async throws -> DBusSignalStream {
        try await signals(matching: DBusMatchRule(sender: BlueZ.service))
    }
}

/// Connects to the system bus, runs `body`, and closes the connection whatever happens.
func withSystemBus<T>(_ body: (DBusConnection) async throws -> T) async throws -> T {
    let bus = try await DBusConnection.connect(to: .system)
    return try await withCleanup {
        try await body(bus)
    } cleanup: {
        await bus.close()
    }
}
