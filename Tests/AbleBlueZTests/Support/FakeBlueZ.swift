import Able
import AbleDBus
import AbleTestSupport
import Foundation

@testable import AbleBlueZ

/// A stand-in for `bluetoothd` on a private bus: it owns `org.bluez` and exports adapters with
/// the `org.bluez.Adapter1` properties Able reads, under an object manager at `/`.
final class FakeBlueZ: Sendable {
    let connection: DBusConnection
    /// The discovery calls received, in order: `SetDiscoveryFilter`, `StartDiscovery`, `StopDiscovery`.
    let discoveryCalls = Locked<[String]>([])
    /// The registered pairing agent: its owner's unique name and its path.
    let agent = Locked<(owner: String, path: DBusObjectPath)?>(nil)
    /// Whether the registered agent asked to be the default agent (`RequestDefaultAgent`).
    let agentIsDefault = Locked(false)
    /// The registered GATT application: its owner, its root, and the objects it exported.
    let application = Locked<
        (owner: String, root: DBusObjectPath, objects: [DBusObjectPath: [String: [String: DBusVariant]]])?
    >(nil)
    /// The registered advertisement: owner, path and properties as BlueZ read them.
    let advertisement = Locked<(owner: String, path: DBusObjectPath, properties: [String: DBusVariant])?>(nil)
    /// The last discovery filter set.
    let discoveryFilter = Locked<[String: DBusVariant]>([:])
    /// How long `StartDiscovery`, `RegisterApplication` and `RegisterAdvertisement` wait before
    /// they answer, once they have done their work: the window in which a caller gives up.
    let replyDelay = Locked<Duration>(.zero)
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
        let agent = self.agent
        let agentIsDefault = self.agentIsDefault
        try await connection.export(
            [
                DBusInterface(
                    "org.bluez.AgentManager1",
                    methods: [
                        DBusMethod.immediate("RegisterAgent", in: "os") { call in
                            agent.value = (call.sender, try call.argument(0))
                            agentIsDefault.value = false
                            return []
                        },
                        DBusMethod.immediate("RequestDefaultAgent", in: "o") { _ in
                            agentIsDefault.value = true
                            return []
                        },
                        DBusMethod.immediate("UnregisterAgent", in: "o") { _ in
                            agent.value = nil
                            agentIsDefault.value = false
                            return []
                        },
                    ])
            ], at: "/org/bluez")
        for (name, properties) in adapters {
            let path = DBusObjectPath(rawValue: "/org/bluez/\(name)")!
            let declared = properties.value.keys.sorted().map { key in
                let writable = ["Powered", "Discoverable", "Pairable", "Alias"].contains(key)
                let set: (@Sendable (String, DBusValue) throws -> Void)? =
                    writable ? { @Sendable _, value in properties.value[key] = value } : nil
                return DBusProperty(
                    key, signature: properties.value[key]!.signature, get: { properties.value[key]! }, set: set)
            }
            let calls = discoveryCalls
            let filter = discoveryFilter
            let methods = [
                DBusMethod.immediate("SetDiscoveryFilter", in: "a{sv}") { call in
                    calls.value.append("SetDiscoveryFilter")
                    filter.value = try call.argument(0)
                    return []
                },
                DBusMethod("StartDiscovery") { [weak self, replyDelay] _ in
                    calls.value.append("StartDiscovery")
                    self?.change(name, "Discovering", to: .boolean(true))
                    try await Task.sleep(for: replyDelay.value)
                    return []
                },
                DBusMethod("StopDiscovery") { [weak self] _ in
                    calls.value.append("StopDiscovery")
                    self?.change(name, "Discovering", to: .boolean(false))
                    return []
                },
            ]
            let application = self.application
            let replyDelay = self.replyDelay
            let gattManager = DBusInterface(
                "org.bluez.GattManager1",
                methods: [
                    DBusMethod("RegisterApplication", in: "oa{sv}") { [connection] call in
                        // Like bluetoothd, read the application's objects back before answering.
                        let root = try call.argument(0, as: DBusObjectPath.self)
                        let reply = try await connection.call(
                            destination: call.sender, path: root, interface: "org.freedesktop.DBus.ObjectManager",
                            method: "GetManagedObjects")
                        application.value = (call.sender, root, try reply[0].decode())
                        try await Task.sleep(for: replyDelay.value)
                        return []
                    },
                    DBusMethod.immediate("UnregisterApplication", in: "o") { _ in
                        application.value = nil
                        return []
                    },
                ])
            let advertisement = self.advertisement
            let advertisingManager = DBusInterface(
                "org.bluez.LEAdvertisingManager1",
                methods: [
                    DBusMethod("RegisterAdvertisement", in: "oa{sv}") { [connection] call in
                        let path = try call.argument(0, as: DBusObjectPath.self)
                        let reply = try await connection.call(
                            destination: call.sender, path: path, interface: "org.freedesktop.DBus.Properties",
                            method: "GetAll", arguments: [.string("org.bluez.LEAdvertisement1")])
                        let properties = try reply[0].decode([String: DBusVariant].self)
                        if (try properties.decode("LocalName", as: String.self))?.hasPrefix("refuse") == true {
                            throw DBusError("org.bluez.Error.NotPermitted", "Maximum advertisements reached")
                        }
                        advertisement.value = (call.sender, path, properties)
                        try await Task.sleep(for: replyDelay.value)
                        return []
                    },
                    DBusMethod.immediate("UnregisterAdvertisement", in: "o") { _ in
                        advertisement.value = nil
                        return []
                    },
                ],
                properties: [
                    // As BlueZ 5.66 reports them for an emulated legacy controller.
                    .constant("SupportedInstances", UInt8(5)), .constant("ActiveInstances", UInt8(0)),
                    .constant("SupportedIncludes", ["tx-power", "appearance", "local-name"]),
                    .constant("SupportedSecondaryChannels", [String]()),
                ])
            try await connection.export(
                [
                    DBusInterface("org.bluez.Adapter1", methods: methods, properties: declared), gattManager,
                    advertisingManager,
                ], at: path)
        }
    }

    /// Makes a device appear under an adapter, as BlueZ does for a first advertising report.
    func addDevice(
        _ address: String, on adapter: String = "hci0", name: String? = nil, uuids: [String] = [], rssi: Int16 = -50
    ) async throws {
        var properties: [DBusProperty] = [
            .constant("Address", address), .constant("AddressType", "public"), .constant("UUIDs", uuids),
            .constant("RSSI", rssi), .constant("Connected", false),
        ]
        if let name { properties.append(.constant("Name", name)) }
        try await connection.export(
            [DBusInterface("org.bluez.Device1", properties: properties)], at: devicePath(address, on: adapter))
    }

    /// Announces a new advertising report of a known device.
    func report(_ address: String, on adapter: String = "hci0", rssi: Int16) {
        connection.emitPropertiesChanged(
            path: devicePath(address, on: adapter), interface: "org.bluez.Device1", changed: ["RSSI": .int16(rssi)])
    }

    func devicePath(_ address: String, on adapter: String) -> DBusObjectPath {
        DBusObjectPath(rawValue: "/org/bluez/\(adapter)/dev_" + address.replacingOccurrences(of: ":", with: "_"))!
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
