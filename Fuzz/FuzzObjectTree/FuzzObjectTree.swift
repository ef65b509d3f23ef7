// Fuzzes Able's picture of BlueZ's object tree: a `GetManagedObjects` reply, then a sequence of
// `InterfacesAdded`, `InterfacesRemoved` and `PropertiesChanged` signals (and others), built by
// `FuzzValueBuilder` from the input: wrong types, missing keys, huge arrays, paths that do not
// nest, objects removed twice. Each message travels through libdbus's wire form and is read as
// the tree's subscription reads it (in place first, then decoded), applied to the tree's state,
// and after each change the readers of the BlueZ backend run on every object (adapter state,
// discoveries with their advertisement data, GATT object identities, flags). Now and then the
// service leaves the bus, after which the tree must be empty.

import AbleCore
import CDBus

@testable import AbleBlueZ
@testable import AbleDBus

@_cdecl("FuzzObjectTree_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    if argc == 3, let flag = argv?[1], String(cString: flag) == "--write-seeds", let directory = argv?[2] {
        FuzzMessages.write(seeds, to: String(cString: directory))
        return 0
    }
    return runFuzzer(argc, argv, testOneInput)
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var builder = FuzzValueBuilder(FuzzReader(fuzzInput(data, size)))
    var state = BlueZObjectTree.State()
    state.owner = ":1.7"

    // GetManagedObjects, as BlueZObjectTree.load reads it.
    let objects = DBusValue.dictionary(
        key: .objectPath, value: .dictionary(.string, .dictionary(.string, .variant)),
        (0..<Int(builder.reader.byte() % 6)).map { _ in
            DBusDictionaryEntry(
                key: .objectPath(builder.path()),
                value: .dictionary(
                    key: .string, value: .dictionary(.string, .variant),
                    (0..<Int(builder.reader.byte() % 3)).map { _ in
                        DBusDictionaryEntry(key: .string(builder.string()), value: builder.properties())
                    }))
        })
    let reply = builder.reader.byte() & 0x80 == 0 ? [objects] : builder.arguments()
    // As BlueZObjectTree.load applies it: after the signals that came before its reply was read
    // (a 0xFD byte in the input, or the end), without what those removed or set.
    let since = state.beginRead()
    var snapshot: [DBusObjectPath: BlueZObjectTree.Interfaces]?
    if let message = FuzzMessages.demarshal(FuzzMessages.methodReturn(reply)) {
        defer { dbus_message_unref(message) }
        var strings: RecentStrings? = RecentStrings()
        if case .success(let values) = ConnectionCore.decodeReply(message, strings: &strings) {
            snapshot = try? values.first.unwrapped("GetManagedObjects").decode(
                [DBusObjectPath: BlueZObjectTree.Interfaces].self)
        }
    }
    func applySnapshot(_ state: inout BlueZObjectTree.State) {
        guard state.readsInFlight > 0 else { return }
        _ = state.applyLoad(snapshot ?? [:], after: since)
        state.endRead()
        precondition(state.removedDuringReads.isEmpty, "removals are remembered only while a read is in flight")
        readEverything(state)
    }

    while !builder.reader.isAtEnd {
        switch builder.reader.byte() {
        case 0xFE:
            serviceLeaves(&state)
            continue
        case 0xFD:
            applySnapshot(&state)
            continue
        default:
            break
        }
        guard let message = FuzzMessages.demarshal(builder.signal()) else { continue }
        defer { dbus_message_unref(message) }
        let view = DBusSignalView(
            message: message, sender: ":1.7", path: String(cString: dbus_message_get_path(message)),
            interface: String(cString: dbus_message_get_interface(message)),
            member: String(cString: dbus_message_get_member(message)))
        // As a characteristic's value receiver and then the tree read it.
        _ = try? view.changedByteArray(named: "Value", of: "org.bluez.GattCharacteristic1")
        guard !view.changesOnly(property: "Value", of: "org.bluez.GattCharacteristic1"),
            let signal = try? view.decoded(), let change = BlueZObjectTree.change(from: signal)
        else { continue }
        _ = state.apply(change)
        readEverything(state)
    }
    applySnapshot(&state)
    serviceLeaves(&state)
    return 0
}

/// What BlueZObjectTree.vanish does: every object removed, after which none may remain.
private func serviceLeaves(_ state: inout BlueZObjectTree.State) {
    _ = state.apply(.serviceLeft)
    for (path, interfaces) in state.objects.sorted(by: { $0.key < $1.key }) {
        _ = state.apply(.interfacesRemoved(path, Array(interfaces.keys)))
    }
    guard state.objects.isEmpty, state.owner == nil, state.disconnections.isEmpty else {
        fatalError("objects remain after the service left: \(state.objects), \(state.disconnections)")
    }
    state.owner = ":1.8"
}

/// The backend's readers of BlueZ objects, on every object.
private func readEverything(_ state: BlueZObjectTree.State) {
    for (path, interfaces) in state.objects {
        let adapter = BlueZAdapterBackend.state(name: path.lastElement, from: interfaces["org.bluez.Adapter1"])
        _ = adapter.address
        if let device = interfaces["org.bluez.Device1"] {
            _ = Discovery(bluezDevice: device)
            _ = BluetoothAddress(bluezPathComponent: path.lastElement)
        }
        for (name, properties) in interfaces where name.hasPrefix("org.bluez.Gatt") {
            var ancestor = path
            while ancestor != .root, let parent = ancestor.parent {
                _ = RemoteAttributeID(path: path, device: parent)?.path(device: parent)
                ancestor = parent
            }
            _ = (try? properties.decode("UUID", as: String.self)).flatMap(BluetoothUUID.init)
            let flags = (try? properties.decode("Flags", as: [String].self)) ?? []
            _ = CharacteristicProperties(bluezFlags: flags)
            _ = AttributePermissions(bluezFlags: flags)
            _ = try? properties.decode("Value", as: [UInt8].self)
        }
    }
}

private let seeds: [(String, [UInt8])] = [
    // Two objects loaded, then added, changed, removed twice, the service leaving.
    ("load-change-remove", [2, 5, 1, 1, 3, 2, 25, 11, 6, 2, 3, 1, 7, 1, 5, 2, 3, 6, 0, 5, 2, 2, 14, 1, 1, 0xFE]),
    ("devices", [3, 5, 1, 1, 3, 3, 5, 0, 34, 22, 0, 3, 18, 8, 1, 2, 6, 3, 21, 13, 28, 2, 200, 0, 0]),
    ("gatt", [4, 7, 1, 3, 2, 27, 0, 29, 16, 1, 8, 1, 4, 2, 25, 11, 3, 1, 2, 3, 0, 2, 26, 1, 4, 1]),
    ("odd-reply", [1, 0x80, 3, 16, 2, 13, 0x82, 2, 2]),
]
