// Shared by the D-Bus fuzz targets (a symlink in each one's folder): turning bytes into
// messages with libdbus's own demarshaller, and messages into bytes for the seed corpora.

import CDBus

@testable import AbleDBus

#if canImport(Glibc)
    import Glibc
#endif

enum FuzzMessages {
    /// The message whose wire form `bytes` are, or `nil` when libdbus refuses them. The caller
    /// unrefs it.
    static func demarshal(_ bytes: [UInt8]) -> OpaquePointer? {
        guard !bytes.isEmpty, bytes.count < Int(Int32.max) else { return nil }
        return bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { dbus_message_demarshal($0.baseAddress, Int32($0.count), nil) }
        }
    }

    /// The wire form of a signal carrying `arguments`.
    static func signal(
        sender: String = ":1.7", path: String, interface: String, member: String, _ arguments: [DBusValue]
    ) -> [UInt8] {
        guard let message = dbus_message_new_signal(path, interface, member) else { fatalError("no memory") }
        dbus_message_set_sender(message, sender)
        return marshal(message, arguments)
    }

    /// The wire form of a method return carrying `arguments`.
    static func methodReturn(_ arguments: [DBusValue]) -> [UInt8] {
        guard let call = dbus_message_new_method_call(":1.7", "/", "org.example", "Call") else { fatalError() }
        dbus_message_set_serial(call, 1)
        guard let message = dbus_message_new_method_return(call) else { fatalError("no memory") }
        dbus_message_unref(call)
        return marshal(message, arguments)
    }

    /// The wire form of an error reply.
    static func errorReply(name: String, text: String) -> [UInt8] {
        guard let call = dbus_message_new_method_call(":1.7", "/", "org.example", "Call") else { fatalError() }
        dbus_message_set_serial(call, 1)
        guard let message = dbus_message_new_error(call, name, text) else { fatalError("no memory") }
        dbus_message_unref(call)
        return marshal(message, [])
    }

    private static func marshal(_ message: OpaquePointer, _ arguments: [DBusValue]) -> [UInt8] {
        defer { dbus_message_unref(message) }
        do { try MessageCoding.append(arguments, to: message) } catch { fatalError("\(error)") }
        dbus_message_set_serial(message, 2)
        var pointer: UnsafeMutablePointer<CChar>?
        var count: Int32 = 0
        guard dbus_message_marshal(message, &pointer, &count) != 0, let pointer else { fatalError("no memory") }
        defer { dbus_free(pointer) }
        return Array(UnsafeRawBufferPointer(start: pointer, count: Int(count)))
    }

    /// Writes each seed as a file named after its key into `directory`.
    static func write(_ seeds: [(String, [UInt8])], to directory: String) {
        mkdir(directory, 0o755)
        for (name, bytes) in seeds {
            guard let file = fopen("\(directory)/\(name)", "wb") else {
                fatalError("cannot write \(directory)/\(name)")
            }
            _ = bytes.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
    }

    /// An `a{sv}` of these properties.
    static func properties(_ entries: [(String, DBusValue)]) -> DBusValue {
        .dictionary(
            key: .string, value: .variant,
            entries.map { DBusDictionaryEntry(key: .string($0.0), value: .variant($0.1)) })
    }
}

/// Builds well-formed but odd D-Bus values and signals from a fuzzer's choices: any type, any
/// nesting (bounded), strings and paths from BlueZ's vocabulary or from the input.
struct FuzzValueBuilder {
    var reader: FuzzReader
    /// How many more elements arrays and dictionaries may hold in all, so that nesting cannot
    /// multiply a long array into a slow input.
    private var budget = 600

    init(_ reader: FuzzReader) { self.reader = reader }

    private indirect enum Shape {
        case basic(DBusSignature)
        case bytes
        case array(Shape)
        case dictionary(DBusSignature, Shape)
        case structure([Shape])
        case variant

        var signature: DBusSignature {
            switch self {
            case .basic(let signature): signature
            case .bytes: "ay"
            case .array(let element): .array(element.signature)
            case .dictionary(let key, let value): .dictionary(key, value.signature)
            case .structure(let fields): .structure(fields.map(\.signature))
            case .variant: .variant
            }
        }
    }

    private static let basics: [DBusSignature] = [
        .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .string, .objectPath, .signature,
    ]

    static let vocabulary = [
        "org.bluez.Adapter1", "org.bluez.Device1", "org.bluez.GattService1", "org.bluez.GattCharacteristic1",
        "org.bluez.GattDescriptor1", "Address", "AddressType", "Name", "Alias", "Powered", "Discovering", "Connected",
        "ServicesResolved", "UUIDs", "UUID", "RSSI", "TxPower", "ManufacturerData", "ServiceData", "Appearance",
        "Value", "Flags", "Notifying", "Service", "Characteristic", "Device", "Adapter", "Primary",
        "00:AA:01:01:00:01", "0000180d-0000-1000-8000-00805f9b34fb", "180d", "2a37", "random", "public", "read",
        "write", "notify", "org.bluez", ":1.7", "",
    ]

    static let paths: [DBusObjectPath] = [
        "/", "/org", "/org/bluez", "/org/bluez/hci0", "/org/bluez/hci1", "/org/bluez/hci0/dev_00_AA_01_01_00_01",
        "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001",
        "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001/char0002",
        "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001/char0002/desc0004",
        "/org/bluez/hci0/dev_00_AA_01_01_00_01/char0002", "/org/bluez/hci0/dev_XX",
    ]

    mutating func string() -> String {
        let choice = reader.byte()
        if choice < 0xC0 { return Self.vocabulary[Int(choice) % Self.vocabulary.count] }
        return String(decoding: reader.chunk().filter { $0 != 0 }, as: UTF8.self)
    }

    mutating func path() -> DBusObjectPath {
        let choice = reader.byte()
        if choice < 0xE0 { return Self.paths[Int(choice) % Self.paths.count] }
        let base = Self.paths[Int(reader.byte()) % Self.paths.count]
        let element = String(decoding: reader.chunk().filter { $0.isPathCharacter }, as: UTF8.self)
        return base.appending(element.isEmpty ? "x" : element) ?? base
    }

    private mutating func shape(depth: Int) -> Shape {
        let choice = reader.byte()
        guard depth < 4 else { return .basic(Self.basics[Int(choice) % Self.basics.count]) }
        switch choice % 20 {
        case 0..<11: return .basic(Self.basics[Int(choice / 20) % Self.basics.count])
        case 11, 12: return .bytes
        case 13: return .array(shape(depth: depth + 1))
        case 14, 15:
            return .dictionary(Self.basics[Int(reader.byte()) % Self.basics.count], shape(depth: depth + 1))
        case 16: return .structure((0...Int(reader.byte() % 3)).map { _ in shape(depth: depth + 1) })
        default: return .variant
        }
    }

    private mutating func value(of shape: Shape, depth: Int) -> DBusValue {
        switch shape {
        case .basic(let signature): return basic(signature)
        case .bytes: return .bytes(reader.chunk())
        case .array(let element):
            return .array(element.signature, (0..<count()).map { _ in value(of: element, depth: depth + 1) })
        case .dictionary(let key, let element):
            return .dictionary(
                key: key, value: element.signature,
                (0..<count()).map { _ in
                    DBusDictionaryEntry(key: basic(key), value: value(of: element, depth: depth + 1))
                })
        case .structure(let fields): return .structure(fields.map { value(of: $0, depth: depth + 1) })
        case .variant: return .variant(value(depth: depth + 1))
        }
    }

    private mutating func count() -> Int {
        let choice = reader.byte()
        // Now and then a long array, to reach what only size reaches.
        let count = min(budget, choice == 0xFF ? 300 : Int(choice % 5))
        budget -= count
        return count
    }

    private mutating func basic(_ signature: DBusSignature) -> DBusValue {
        switch signature {
        case .byte: .byte(reader.byte())
        case .boolean: .boolean(reader.byte() & 1 == 1)
        case .int16: .int16(Int16(bitPattern: reader.uint16()))
        case .uint16: .uint16(reader.uint16())
        case .int32: .int32(Int32(bitPattern: reader.uint32()))
        case .uint32: .uint32(reader.uint32())
        case .int64: .int64(Int64(bitPattern: UInt64(reader.uint32()) << 32 | UInt64(reader.uint32())))
        case .uint64: .uint64(UInt64(reader.uint32()))
        case .double: .double(Double(bitPattern: UInt64(reader.uint32()) << 32 | UInt64(reader.uint32())))
        case .objectPath: .objectPath(path())
        case .signature: .signature(shape(depth: 2).signature)
        default: .string(string())
        }
    }

    /// Any value.
    mutating func value(depth: Int = 0) -> DBusValue {
        let shape = shape(depth: depth)
        return value(of: shape, depth: depth)
    }

    /// A few values of any types.
    mutating func arguments() -> [DBusValue] {
        (0..<Int(reader.byte() % 4)).map { _ in value() }
    }

    /// An `a{sv}` of BlueZ-like properties.
    mutating func properties() -> DBusValue {
        FuzzMessages.properties((0..<count()).map { _ in (string(), value(depth: 1)) })
    }

    /// A signal the BlueZ object tree listens to, mostly in the shape BlueZ sends, sometimes not.
    mutating func signal() -> [UInt8] {
        let kind = reader.byte()
        let odd = kind & 0x80 != 0
        switch kind % 4 {
        case 0:
            let interfaces = DBusValue.dictionary(
                key: .string, value: .dictionary(.string, .variant),
                (0..<count()).map { _ in DBusDictionaryEntry(key: .string(string()), value: properties()) })
            return FuzzMessages.signal(
                path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
                odd ? arguments() : [.objectPath(path()), interfaces])
        case 1:
            let names = DBusValue.array(.string, (0..<count()).map { _ in .string(string()) })
            return FuzzMessages.signal(
                path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved",
                odd ? arguments() : [.objectPath(path()), names])
        case 2:
            let invalidated = DBusValue.array(.string, (0..<count()).map { _ in .string(string()) })
            return FuzzMessages.signal(
                path: path().rawValue, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                odd ? arguments() : [.string(string()), properties(), invalidated])
        default:
            if kind & 0x40 != 0 {
                // BlueZ 5.83's announcement of why a link ended.
                return FuzzMessages.signal(
                    path: path().rawValue, interface: "org.bluez.Device1", member: "Disconnected",
                    odd ? arguments() : [.string(string()), .string(string())])
            }
            return FuzzMessages.signal(
                path: path().rawValue, interface: odd ? "org.example" : "org.freedesktop.DBus.Properties",
                member: odd ? "Odd" : "PropertiesChanged", arguments())
        }
    }
}

extension UInt8 {
    fileprivate var isPathCharacter: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) || self == 0x5F
    }
}
