// Fuzzes what a hostile peripheral can make of the GATT database a central sees. A sequence of
// `InterfacesAdded`, `PropertiesChanged` and `InterfacesRemoved` signals builds GattService1,
// GattCharacteristic1 and GattDescriptor1 objects (and Device1 ones) for two devices: handles
// from the input (duplicates included), paths BlueZ's shape or odd ones (too deep, under the other
// device, not nested), links (`Device`, `Service`, `Characteristic`) to the right parent, to
// another device's, to themselves or to a child (cycles), missing or of the wrong type, UUIDs,
// flags, values and MTUs of the right or the wrong type. Each signal travels through libdbus's
// wire form and is read as the object tree reads it, then applied to the tree's state.
//
// After each change, for each device, the database is built by the central's code
// (`BlueZPeripheralBackend.gattDatabase`) and kept as the tree keeps it until a change of GATT
// attributes: a database kept must equal one built afresh. Then every attribute is looked up
// and read as the central does: its identity must lead back to an object of its kind with its
// UUID, identities must be distinct, and its value, MTU, flags and descriptions are read.
//
// `FuzzGATTDatabase --write-seeds DIR` writes the seed corpus.

import AbleCore
import CDBus

@testable import AbleBlueZ
@testable import AbleDBus

@_cdecl("FuzzGATTDatabase_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    if argc == 3, let flag = argv?[1], String(cString: flag) == "--write-seeds", let directory = argv?[2] {
        FuzzMessages.write(seeds, to: String(cString: directory))
        return 0
    }
    return runFuzzer(argc, argv, testOneInput)
}

private let devices: [DBusObjectPath] = [
    "/org/bluez/hci0/dev_00_AA_01_01_00_01", "/org/bluez/hci0/dev_00_AA_01_01_00_02",
]
private let service = "org.bluez.GattService1"
private let characteristic = "org.bluez.GattCharacteristic1"
private let descriptor = "org.bluez.GattDescriptor1"
private let uuids = [
    "0000180d-0000-1000-8000-00805f9b34fb", "00002a37-0000-1000-8000-00805f9b34fb",
    "00002902-0000-1000-8000-00805f9b34fb", "6e400001-b5a3-f393-e0a9-e50e24dcca9e", "180d", "not-a-uuid", "",
]
private let flags = [
    "read", "write", "write-without-response", "notify", "indicate", "reliable-write", "authenticated-signed-writes",
    "encrypt-read", "encrypt-write", "writable-auxiliaries", "extended-properties", "broadcast", "odd",
]

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var builder = GATTObjectBuilder(values: FuzzValueBuilder(FuzzReader(fuzzInput(data, size))))
    var state = BlueZObjectTree.State()
    state.owner = ":1.7"
    var steps = 0
    while !builder.values.reader.isAtEnd, steps < 64 {
        steps += 1
        guard let signal = builder.signal(known: Array(state.objects.keys)) else {
            // The service leaving: every object goes.
            _ = state.apply(.serviceLeft)
            for (path, interfaces) in state.objects.sorted(by: { $0.key < $1.key }) {
                _ = state.apply(.interfacesRemoved(path, Array(interfaces.keys)))
            }
            guard state.objects.isEmpty else { fatalError("objects remain after the service left") }
            state.owner = ":1.8"
            continue
        }
        guard let message = FuzzMessages.demarshal(signal) else { continue }
        defer { dbus_message_unref(message) }
        // As the tree's subscription reads it.
        let view = DBusSignalView(
            message: message, sender: ":1.7", path: String(cString: dbus_message_get_path(message)),
            interface: String(cString: dbus_message_get_interface(message)),
            member: String(cString: dbus_message_get_member(message)))
        _ = try? view.changedByteArray(named: "Value", of: characteristic)
        guard !view.changesOnly(property: "Value", of: characteristic),
            let decoded = try? view.decoded(), let change = BlueZObjectTree.change(from: decoded)
        else { continue }
        _ = state.apply(change)
        for device in devices { lookUp(device, in: &state) }
    }
    return 0
}

/// Builds the database of `device` as `BlueZObjectTree.gattDatabase` does (kept until a change of
/// GATT attributes), and looks up and reads every attribute as the central does.
private func lookUp(_ device: DBusObjectPath, in state: inout BlueZObjectTree.State) {
    let built = BlueZPeripheralBackend.gattDatabase(of: device, in: state.objects)
    if let kept = state.gattDatabases[device] {
        guard kept == built else {
            fatalError("the database kept for \(device) is stale:\nkept \(kept)\nbuilt \(built)\n\(state.objects)")
        }
    } else {
        state.gattDatabases[device] = built
    }
    // Distinct within each kind: an object with two GATT interfaces (which BlueZ never makes)
    // gives one identity to two attributes of different kinds, each looked up by its interface.
    var seen = Set<String>()
    func check(_ id: RemoteAttributeID, _ interface: String, _ uuid: BluetoothUUID) {
        _ = id.description
        // An object BlueZ named otherwise has no identity; operations on it say it is gone.
        guard !id.components.isEmpty else { return }
        guard seen.insert("\(interface) \(id)").inserted else {
            fatalError("two \(interface) attributes of \(device) are both \(id)")
        }
        // As BlueZPeripheralBackend.objectPath finds the object of an attribute.
        guard let path = id.path(device: device), let properties = state.objects[path]?[interface] else {
            fatalError("\(id) of \(device) leads to no \(interface)")
        }
        let found = (try? properties.decode("UUID", as: String.self)).flatMap(BluetoothUUID.init)
        guard found == uuid else { fatalError("\(id) of \(device) leads to \(String(describing: found)), not \(uuid)") }
        // What the central reads of it: the value BlueZ caches, the MTU, the flags.
        _ = try? properties.decode("Value", as: [UInt8].self)
        _ = (try? properties.decode("MTU", as: UInt16.self)).map(Int.init)
        let flags = (try? properties.decode("Flags", as: [String].self)) ?? []
        _ = CharacteristicProperties(bluezFlags: flags)
    }
    for remoteService in built {
        _ = remoteService.description
        check(remoteService.id, service, remoteService.uuid)
        for remoteCharacteristic in remoteService.characteristics {
            _ = remoteCharacteristic.description
            _ = remoteCharacteristic.removedError(of: BluetoothAddress(bluezDevicePath: device)!).description
            guard remoteCharacteristic.serviceUUID == remoteService.uuid else {
                fatalError("\(remoteCharacteristic) is not of \(remoteService)")
            }
            check(remoteCharacteristic.id, characteristic, remoteCharacteristic.uuid)
            for remoteDescriptor in remoteCharacteristic.descriptors {
                _ = remoteDescriptor.description
                guard remoteDescriptor.characteristicUUID == remoteCharacteristic.uuid else {
                    fatalError("\(remoteDescriptor) is not of \(remoteCharacteristic)")
                }
                check(remoteDescriptor.id, descriptor, remoteDescriptor.uuid)
            }
        }
    }
}

/// Builds the signals of a hostile peripheral's GATT objects from a fuzzer's choices.
private struct GATTObjectBuilder {
    var values: FuzzValueBuilder

    /// The next signal; `nil` for the service leaving the bus.
    mutating func signal(known: [DBusObjectPath]) -> [UInt8]? {
        let kind = values.reader.byte()
        switch kind % 8 {
        case 0, 1, 2:
            let interface = [service, characteristic, descriptor][Int(kind % 8)]
            let path = attributePath(depth: Int(kind % 8) + 1, known: known)
            return FuzzMessages.signal(
                path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
                [
                    .objectPath(path),
                    .dictionary(
                        key: .string, value: .dictionary(.string, .variant),
                        [DBusDictionaryEntry(key: .string(interface), value: properties(of: interface, known: known))]
                            + (kind & 0x80 != 0 ? [deviceEntry()] : [])),
                ])
        case 3, 4:
            // A change of an object's properties: most often its link, UUID, flags or value.
            let path = pick(known) ?? attributePath(depth: 2, known: known)
            let interface = [service, characteristic, descriptor, "org.bluez.Device1"][Int(kind >> 3) % 4]
            let invalidated: [DBusValue] =
                kind & 0x40 != 0
                ? [.string(["UUID", "Service", "Characteristic", "Device", "Value"][Int(kind) % 5])] : []
            return FuzzMessages.signal(
                path: path.rawValue, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                [.string(interface), properties(of: interface, known: known), .array(.string, invalidated)])
        case 5:
            let path = pick(known) ?? attributePath(depth: 1, known: known)
            let names = [service, characteristic, descriptor, "org.bluez.Device1"].enumerated().filter {
                kind >> 3 & (1 << $0.offset) != 0
            }.map { DBusValue.string($0.element) }
            return FuzzMessages.signal(
                path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved",
                [.objectPath(path), .array(.string, names)])
        case 6:
            return FuzzMessages.signal(
                path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
                [
                    .objectPath(devices[Int(kind >> 7)]),
                    .dictionary(key: .string, value: .dictionary(.string, .variant), [deviceEntry()]),
                ])
        default:
            return kind & 0x80 != 0 ? nil : values.signal()
        }
    }

    private mutating func pick(_ known: [DBusObjectPath]) -> DBusObjectPath? {
        let choice = values.reader.byte()
        guard !known.isEmpty, choice < 0xF0 else { return nil }
        return known.sorted()[Int(choice) % known.count]
    }

    /// A path of BlueZ's shape (a device, then `service`, `char`, `desc` with four hex digits of a
    /// handle) under either device, `depth` levels down; now and then another depth, an odd
    /// spelling of the handle, or any path.
    private mutating func attributePath(depth: Int, known: [DBusObjectPath]) -> DBusObjectPath {
        let choice = values.reader.byte()
        if choice >= 0xF0 { return values.path() }
        if choice >= 0xE0, let parent = pick(known), let path = parent.appending("char\(hex(values.reader.uint16()))") {
            return path
        }
        var path = devices[Int(choice & 1)]
        let levels = choice & 0x06 == 0x06 ? Int(choice >> 3 & 3) + 1 : depth
        for (level, name) in ["service", "char", "desc", "desc"].prefix(levels).enumerated() {
            // Small handles, so that inputs name the same ones again.
            let handle = choice & 0x08 != 0 ? values.reader.uint16() : UInt16(values.reader.byte() % 8) + UInt16(level)
            let spelled = choice & 0x80 != 0 && level == levels - 1 ? hex(handle).uppercased() : hex(handle)
            path = path.appending(name + spelled) ?? path
        }
        return path
    }

    private func hex(_ value: UInt16) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// The properties BlueZ gives the interface, each of its type, of another, or left out.
    private mutating func properties(of interface: String, known: [DBusObjectPath]) -> DBusValue {
        var entries: [(String, DBusValue)] = []
        let present = values.reader.byte()
        func odd(_ bit: UInt8) -> Bool { present & bit != 0 }
        func add(_ name: String, _ bit: UInt8, _ value: () -> DBusValue) {
            guard !odd(bit) else { return }
            let typeChoice = values.reader.byte()
            entries.append((name, typeChoice >= 0xF0 ? values.value(depth: 1) : value()))
        }
        let uuidChoice = Int(values.reader.byte())
        add("UUID", 0x01) { .string(uuids[uuidChoice % uuids.count]) }
        let link = linkTarget(known: known)
        switch interface {
        case service:
            add("Device", 0x02) { .objectPath(link) }
            let primary = values.reader.byte() & 1 == 0
            add("Primary", 0x04) { .boolean(primary) }
        case characteristic:
            add("Service", 0x02) { .objectPath(link) }
            let chosen = (0..<Int(values.reader.byte() % 4)).map { _ in
                DBusValue.string(flags[Int(values.reader.byte()) % flags.count])
            }
            add("Flags", 0x04) { .array(.string, chosen) }
            let value = values.reader.chunk()
            add("Value", 0x08) { .bytes(value) }
            let mtu = values.reader.uint16()
            add("MTU", 0x10) { .uint16(mtu) }
            add("Notifying", 0x20) { .boolean(mtu & 1 == 0) }
        case descriptor:
            add("Characteristic", 0x02) { .objectPath(link) }
            let value = values.reader.chunk()
            add("Value", 0x08) { .bytes(value) }
        default:
            return FuzzMessages.properties([("Connected", .boolean(present & 1 == 0))])
        }
        let handle = values.reader.uint16()
        add("Handle", 0x40) { .uint16(handle) }
        return FuzzMessages.properties(entries)
    }

    /// What a link points to: an object the tree has (its parent, a sibling, itself, a child), a
    /// device, or any path.
    private mutating func linkTarget(known: [DBusObjectPath]) -> DBusObjectPath {
        let choice = values.reader.byte()
        if choice < 0x80, let path = pick(known) { return path }
        if choice < 0xE0 { return devices[Int(choice & 1)] }
        return values.path()
    }

    private mutating func deviceEntry() -> DBusDictionaryEntry {
        let connected = values.reader.byte()
        return DBusDictionaryEntry(
            key: .string("org.bluez.Device1"),
            value: FuzzMessages.properties([
                ("Connected", .boolean(connected & 1 == 1)), ("ServicesResolved", .boolean(connected & 2 == 2)),
                ("Address", .string("00:AA:01:01:00:01")),
            ]))
    }
}

/// Seeds: a device's service with a characteristic and a descriptor, as BlueZ makes them; the
/// same with a duplicate handle under the other device; a link changed into a cycle.
private let seeds: [(String, [UInt8])] = [
    ("database", [0, 0, 0, 0x01, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0x00, 0, 1, 2, 2, 1, 3, 0, 0, 2, 0, 0, 1, 2]),
    ("duplicate", [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0]),
    ("cycle", [0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0x02, 0, 0, 0, 0]),
    ("removed", [0, 0, 0, 0, 0, 0, 1, 0, 5, 0, 0x08]),
]
