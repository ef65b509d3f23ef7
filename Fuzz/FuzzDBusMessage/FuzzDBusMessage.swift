// Fuzzes what AbleDBus does with a message another process sent. The first byte chooses how the
// rest becomes a message: even, libdbus's demarshaller reads it as a message's wire form
// (invalid ones are refused there; libdbus itself is fuzzed by OSS-Fuzz); odd, it drives
// `FuzzValueBuilder`, which builds a valid but odd signal (any types, any nesting). Then every reader Able applies to a
// received message runs on it: header reading as the connection routes a signal, the match rules
// of subscribers, the in-place readers of `DBusSignalView`, full decoding into `DBusValue`, the
// typed conversions Able's BlueZ backend uses, reply and error decoding (also through a cache of
// recent strings kept from input to input, which must not change a value); and what was decoded is
// encoded again and must decode to the same values.
//
// `FuzzDBusMessage --write-seeds DIR` writes the seed corpus.

import CDBus

@testable import AbleDBus

@_cdecl("FuzzDBusMessage_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    if argc == 3, let flag = argv?[1], String(cString: flag) == "--write-seeds", let directory = argv?[2] {
        // Wire forms start with 0 (demarshal); the built ones with 1 and a few choices.
        let built: [(String, [UInt8])] = [
            ("built-interfaces-added", [1, 0, 4, 3, 1, 2, 3, 3, 5, 22, 0, 7, 40]),
            ("built-properties-changed", [1, 2, 7, 3, 3, 2, 25, 11, 3, 1, 2, 3, 1, 12]),
            ("built-interfaces-removed", [1, 1, 5, 2, 3, 4]),
            ("built-odd", [1, 0x83, 3, 16, 2, 13, 14, 9, 15, 2, 19, 0, 0]),
        ]
        FuzzMessages.write(seeds().map { ($0.0, [0] + $0.1) } + built, to: String(cString: directory))
        return 0
    }
    return runFuzzer(argc, argv, testOneInput)
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    guard let mode = input.first else { return 0 }
    var wire = Array(input.dropFirst())
    if mode & 1 == 1 {
        var builder = FuzzValueBuilder(FuzzReader(wire))
        wire = builder.signal()
    }
    guard let message = FuzzMessages.demarshal(wire) else { return 0 }
    defer { dbus_message_unref(message) }
    var strings = RecentStrings(capacity: 2)
    // As ConnectionCore.routeSignal reads a signal.
    let interface = dbus_message_get_interface(message).map { strings.string($0) } ?? ""
    let member = dbus_message_get_member(message).map { strings.string($0) } ?? ""
    let sender = dbus_message_get_sender(message).map { strings.string($0) } ?? ""
    let path = dbus_message_get_path(message).map { strings.string($0) } ?? "/"
    let view = DBusSignalView(message: message, sender: sender, path: path, interface: interface, member: member)

    for rule in rules {
        _ = rule.matches(
            sender: sender, path: path, interface: interface, member: member,
            argument: { view.stringArgument($0, interning: &strings) }, senderOwner: { _ in ":1.7" })
    }
    _ = view.changesOnly(property: "Value", of: "org.bluez.GattCharacteristic1")
    _ = try? view.changedByteArray(named: "Value", of: "org.bluez.GattCharacteristic1")
    _ = try? view.changedByteArray(named: "Connected", of: "org.bluez.Device1")
    _ = ConnectionCore.decodeReply(message, strings: &recentBodyStrings)

    guard let arguments = try? MessageCoding.decodeArguments(of: message) else { return 0 }
    // With the connection's cache of body strings, which holds those of earlier inputs: the
    // same values as without it.
    guard let cached = try? MessageCoding.decodeArguments(of: message, strings: &recentBodyStrings),
        cached == arguments || cached.description == arguments.description
    else {
        fatalError("the cache of recent strings changed the values of a message:\n\(arguments)")
    }
    for argument in arguments { convert(argument) }
    roundTrip(arguments)
    readInPlace(
        DBusMethodCallView(
            message: message, sender: sender, path: DBusObjectPath(unchecked: path), interface: interface,
            member: member),
        decoded: arguments)
    return 0
}

/// As an in-place method handler reads a call (Able's GATT server reads BlueZ's options so): each
/// argument read in place must be what decoding gave, and one of another shape an error.
private func readInPlace(_ view: DBusMethodCallView, decoded arguments: [DBusValue]) {
    for (index, argument) in arguments.enumerated() {
        let bytes = try? view.bytes(argument: index)
        guard bytes == (try? argument.decode([UInt8].self)) else {
            fatalError("argument \(index) read in place as \(String(describing: bytes)), decoded as \(argument)")
        }
        var entries: [DBusDictionaryEntry] = []
        do {
            try view.forEachEntry(ofDictionary: index) { key, value in
                let read: DBusValue? =
                    value.uint16().map { .uint16($0) } ?? value.boolean().map { .boolean($0) }
                    ?? value.string().map { .string($0) } ?? value.bytes().map { .bytes($0) }
                    ?? value.withObjectPath {
                        .objectPath(DBusObjectPath(unchecked: String(decoding: $0, as: UTF8.self)))
                    }
                entries.append(DBusDictionaryEntry(key: .string(String(cString: key)), value: read ?? .string("?")))
            }
        } catch {
            guard case .dictionary(.string, .variant, _) = argument else { continue }
            fatalError("an a{sv} argument \(index) was not read in place: \(error)\n\(argument)")
        }
        guard case .dictionary(.string, .variant, let decoded) = argument, decoded.count == entries.count else {
            fatalError("argument \(index) read in place as a{sv}, decoded as \(argument)")
        }
        for (entry, inPlace) in zip(decoded, entries) {
            guard entry.key == inPlace.key else { fatalError("key \(inPlace.key) read in place, \(entry.key) decoded") }
            let value = entry.value.unwrappingVariant
            switch value {
            case .uint16, .boolean, .string, .bytes, .objectPath:
                guard value == inPlace.value else {
                    fatalError("\(entry.key) read in place as \(inPlace.value), decoded as \(value)")
                }
            default:
                guard inPlace.value == .string("?") else {
                    fatalError("\(entry.key) read in place as \(inPlace.value), decoded as \(value)")
                }
            }
        }
    }
}

/// The cache of body strings a connection keeps from message to message, kept here from input
/// to input. The fuzzer runs inputs one at a time, on one thread.
nonisolated(unsafe) private var recentBodyStrings: RecentStrings? = RecentStrings(capacity: 4)

/// Rules like the ones Able subscribes with, and one of each field.
private let rules: [DBusMatchRule] = [
    DBusMatchRule(sender: "org.bluez"),
    DBusMatchRule(sender: ":1.7", pathNamespace: "/org/bluez/hci0"),
    DBusMatchRule(
        sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
        arguments: [0: "org.bluez"]),
    DBusMatchRule(path: "/org/bluez/hci0/dev_00_AA_01_01_00_01", arguments: [2: "x", 5: ""]),
    DBusMatchRule(pathNamespace: "/"),
]

/// The conversions Able applies to what BlueZ sends.
private func convert(_ value: DBusValue) {
    _ = try? value.decode([DBusObjectPath: [String: [String: DBusVariant]]].self)
    _ = try? value.decode([String: DBusVariant].self)
    _ = try? value.decode([UInt16: DBusVariant].self)
    _ = try? value.decode([String].self)
    _ = try? value.decode([UInt8].self)
    _ = try? value.decode([DBusObjectPath].self)
    _ = try? value.decode(String.self)
    _ = try? value.decode(DBusObjectPath.self)
    _ = try? value.decode(Int16.self)
    _ = try? value.decode(UInt16.self)
    _ = try? value.decode(Bool.self)
    _ = try? value.decode(DBusVariant.self)
    _ = value.unwrappingVariant
    _ = value.description
    _ = value.signature
    if let properties = try? value.decode([String: DBusVariant].self) {
        for key in ["Address", "Name", "UUIDs", "RSSI", "Flags", "Value"] {
            _ = try? properties.decode(key, as: String.self)
            _ = try? properties.decode(key, as: [String].self)
            _ = try? properties.decode(key, as: Int16.self)
            _ = try? properties.decode(key, as: [UInt8].self)
        }
    }
}

/// Values decoded from a message must encode again (they came from a valid message) and decode
/// to the same values. File descriptors are left out: a demarshalled message carries none.
private func roundTrip(_ arguments: [DBusValue]) {
    guard !arguments.contains(where: { $0.signature.rawValue.contains("h") }) else { return }
    guard let message = dbus_message_new_signal("/", "org.example", "Echo") else { return }
    defer { dbus_message_unref(message) }
    do {
        try MessageCoding.append(arguments, to: message)
    } catch {
        fatalError("values decoded from a valid message did not encode: \(error)\n\(arguments)")
    }
    guard let again = try? MessageCoding.decodeArguments(of: message) else {
        fatalError("a message Able encoded did not decode: \(arguments)")
    }
    // Compared by description when they differ, for NaN, which is not equal to itself.
    guard again == arguments || again.description == arguments.description else {
        fatalError("values changed on the way through a message:\n\(arguments)\n\(again)")
    }
}

private func seeds() -> [(String, [UInt8])] {
    let value = "org.bluez.GattCharacteristic1"
    return [
        (
            "properties-changed-value",
            FuzzMessages.signal(
                path: "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001/char0002",
                interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                [.string(value), FuzzMessages.properties([("Value", .bytes([1, 2, 3]))]), .array(.string, [])])
        ),
        (
            "properties-changed-device",
            FuzzMessages.signal(
                path: "/org/bluez/hci0/dev_00_AA_01_01_00_01", interface: "org.freedesktop.DBus.Properties",
                member: "PropertiesChanged",
                [
                    .string("org.bluez.Device1"),
                    FuzzMessages.properties([("Connected", .boolean(true)), ("RSSI", .int16(-60))]),
                    .array(.string, [.string("ServicesResolved")]),
                ])
        ),
        (
            "interfaces-added",
            FuzzMessages.signal(
                path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
                [
                    .objectPath("/org/bluez/hci0/dev_00_AA_01_01_00_01"),
                    .dictionary(
                        key: .string, value: .dictionary(.string, .variant),
                        [
                            DBusDictionaryEntry(
                                key: .string("org.bluez.Device1"),
                                value: FuzzMessages.properties([
                                    ("Address", .string("00:AA:01:01:00:01")),
                                    ("UUIDs", .array(.string, [.string("0000180d-0000-1000-8000-00805f9b34fb")])),
                                    (
                                        "ManufacturerData",
                                        .dictionary(
                                            key: .uint16, value: .variant,
                                            [DBusDictionaryEntry(key: .uint16(0x004C), value: .variant(.bytes([1])))])
                                    ),
                                ]))
                        ]),
                ])
        ),
        (
            "name-owner-changed",
            FuzzMessages.signal(
                sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "NameOwnerChanged", [.string("org.bluez"), .string(":1.7"), .string("")])
        ),
        (
            "every-type",
            FuzzMessages.signal(
                path: "/a", interface: "org.example", member: "Types",
                [
                    .byte(1), .boolean(true), .int16(-2), .uint16(3), .int32(-4), .uint32(5), .int64(-6), .uint64(7),
                    .double(8.5), .string("nine"), .objectPath("/ten"), .signature("a{sv}"),
                    .structure([.string("s"), .variant(.array(.int32, [.int32(1), .int32(2)]))]),
                    .array(.structure([.byte, .string]), [.structure([.byte(1), .string("x")])]),
                    .dictionary(key: .string, value: .array(.string), []),
                    .variant(.variant(.bytes([]))),
                ])
        ),
        ("method-return", FuzzMessages.methodReturn([.bytes([0x48, 0x69])])),
        (
            "error",
            FuzzMessages.errorReply(name: "org.bluez.Error.Failed", text: "Operation failed with ATT error: 0x0e")
        ),
    ]
}
