// Fuzzes the method dispatch of the objects Able exports for BlueZ, which any local process can
// call and `bluetoothd` feeds with what remote devices send: a GATT application (characteristics
// answered at once and in tasks, a notifying one with AcquireNotify, descriptors), the pairing
// agent (a standing agent set on the adapter) and an advertisement, all made by the BlueZ
// backend's own code through Able's public API.
//
// The connection is attached to no bus (`DBusConnection.detached`): this program plays both the
// bus and `bluetoothd`, answering Able's own calls (AddMatch, GetNameOwner, GetManagedObjects,
// RegisterApplication, …) from its outbox, and delivers the input's method calls straight into
// the connection's dispatch. Each input is a sequence of calls, each with a sender (BlueZ's unique
// name or another), a path (the exported objects and their neighbours), an interface, a member,
// and arguments in the member's shape (GATT options with odd keys and types, device paths) or
// any others. After each input: every call got exactly one reply (none when it asked for none),
// and nothing is left over (calls awaiting replies, subscribers, exported objects, the tree's
// listeners).
//
// `FuzzExports --write-seeds DIR` writes the seed corpus.

import AbleCore
import AbleIO
import CDBus
import Dispatch
import Synchronization

@testable import AbleBlueZ
@testable import AbleDBus

#if canImport(Glibc)
    import Glibc
#endif

@_cdecl("FuzzExports_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    if argc == 3, let flag = argv?[1], String(cString: flag) == "--write-seeds", let directory = argv?[2] {
        FuzzMessages.write(seeds, to: String(cString: directory))
        return 0
    }
    harness.setUp()
    return runFuzzer(argc, argv, testOneInput)
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    harness.run(fuzzInput(data, size))
    return 0
}

private let harness = Harness()

/// The bus and `bluetoothd` around one detached connection, and the Able objects on it.
private final class Harness: @unchecked Sendable {
    static let bluez = ":1.7"
    static let adapter: DBusObjectPath = "/org/bluez/hci0"

    private struct State {
        /// Replies seen, by the serial of the call they answer.
        var replies: [UInt32: Int] = [:]
        /// The calls of the current input that await a reply.
        var awaited: Set<UInt32> = []
        /// Every call delivered, by serial: whether it asked for a reply.
        var delivered: [UInt32: Bool] = [:]
    }

    private let state = Mutex(State())
    private let progress = DispatchSemaphore(value: 0)
    nonisolated(unsafe) private var connection: DBusConnection!
    nonisolated(unsafe) private var core: ConnectionCore!
    nonisolated(unsafe) private var objects: [DBusObjectPath] = []
    nonisolated(unsafe) private var baseline: Counts?
    nonisolated(unsafe) private var nextSerial: UInt32 = 0x1000_0000
    /// Kept for the process's life: the Able objects whose exports are fuzzed.
    nonisolated(unsafe) private var kept: [Any] = []
    nonisolated(unsafe) private var system: BlueZSystem?

    private struct Counts: Equatable {
        var pendingCalls: Int
        var subscribers: Int
        var trackedNames: Int
        var exports: Int
        var treeListeners: Int
    }

    /// Opens the connection, the BlueZ system on it and the objects: a GATT server, a standing
    /// pairing agent and an advertisement.
    func setUp() {
        var error = DBusErrorBox()
        // A private connection to a server that never accepts it: libdbus needs a connection
        // object, and nothing is ever read from or written to it.
        guard let server = dbus_server_listen("unix:tmpdir=/tmp", &error.raw),
            let address = dbus_server_get_address(server)
        else { fatalError("no D-Bus server: \(error.swiftError(default: "?"))") }
        defer { dbus_free(address) }
        guard let raw = dbus_connection_open_private(address, &error.raw) else {
            fatalError("no D-Bus connection: \(error.swiftError(default: "?"))")
        }
        error.free()
        kept.append(ServerReference(server: server))
        connection = DBusConnection.detached(
            raw: raw, uniqueName: ":1.42", log: { _ in }, outbox: { [self] message in sent(message) })
        blocking { [self] in
            let system = try await BlueZSystem.open(on: connection)
            let adapter = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci0", system: system))
            let server = try await GATTServer.start(on: adapter, definition: Self.definition)
            try await adapter.setPairingAgent(Self.agent)
            let advertisement = try await adapter.startAdvertising(
                Advertisement(localName: "able", serviceUUIDs: [Self.service], manufacturerData: [0xFFFF: [1, 2]]))
            kept += [adapter, server, advertisement]
            self.system = system
            self.core = await connection.core
        }
        objects = onLoop { [core] in Array(core!.exports.objects.keys).sorted() }
        baseline = counts()
    }

    private final class ServerReference: @unchecked Sendable {
        let server: OpaquePointer
        init(server: OpaquePointer) { self.server = server }
    }

    static let service: BluetoothUUID = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
    static func uuid(_ last: UInt16) -> BluetoothUUID {
        BluetoothUUID(uuid128: (UInt128(0x6E40_0000) + UInt128(last)) << 96 | 0xB5A3_F393_E0A9_E50E_24DC_CA9E)
    }

    static let definition = GATTServerDefinition {
        Service(service) {
            Characteristic(uuid(2), properties: [.read, .write, .writeWithoutResponse], value: [1, 2, 3]) {
                Descriptor(.characteristicUserDescription, permissions: [.readable, .writable], value: Array("a".utf8))
            }
            Characteristic(uuid(3), properties: [.read, .write])
            Characteristic(uuid(4), properties: [.notify])
            Characteristic(uuid(5), properties: [.indicate, .read], permissions: [.readable])
            Characteristic(uuid(6), properties: [.read, .write, .reliableWrite], value: Array(repeating: 7, count: 40))
        }
        Service(uuid(0x10), .secondary) {
            Characteristic(uuid(0x11), properties: [.read, .write], value: [])
        }
        OnRead(CharacteristicID(uuid(3), service: service)) { request in
            await Task.yield()
            guard request.offset < 10 else { throw ATTError.invalidOffset }
            return Array(repeating: 3, count: 10 - request.offset)
        }
        OnWrite(CharacteristicID(uuid(3), service: service)) { request in
            await Task.yield()
            return request.value.first == 0 ? .accept : .store
        }
        OnRead(.anyCharacteristic, answering: .immediately) { request in
            guard request.offset <= request.storedValue.count else { throw ATTError.invalidOffset }
            return Array(request.storedValue.dropFirst(request.offset))
        }
        OnWrite(.anyCharacteristic, answering: .immediately) { request in
            guard request.value.count < 30 else { throw ATTError.application(0x80)! }
            return .store
        }
    }

    static let agent = PairingAgent(
        capability: .keyboardDisplay, confirm: { _, passkey in passkey % 2 == 0 },
        passkey: { device in device.littleEndianBytes[0] & 1 == 0 ? 123_456 : nil })

    /// Runs `body` to its end from this (non-async) thread.
    private func blocking(_ body: @escaping @Sendable () async throws -> Void) {
        let done = DispatchSemaphore(value: 0)
        let failure = Mutex<String?>(nil)
        Task {
            do { try await body() } catch { failure.withLock { $0 = "\(error)" } }
            done.signal()
        }
        done.wait()
        if let failure = failure.withLock({ $0 }) { fatalError("setting up failed: \(failure)") }
    }

    /// Runs `body` on the connection's loop and returns what it returned.
    private func onLoop<T>(_ body: @escaping () -> T) -> T {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: T?
        nonisolated(unsafe) let body = body
        core.loop.execute {
            result = body()
            done.signal()
        }
        done.wait()
        return result!
    }

    private func counts() -> Counts {
        let tree = system?.tree
        return onLoop { [core] in
            let resources = core!.resourceCounts
            return Counts(
                pendingCalls: resources.pendingCalls, subscribers: resources.subscribers,
                trackedNames: resources.trackedNames, exports: core!.exports.objects.count,
                treeListeners: tree?.resourceCounts.listeners ?? 0)
        }
    }

    // MARK: The bus and bluetoothd

    /// What the connection sent: a reply to one of the input's calls, or a call of Able's, which
    /// is answered as the bus or `bluetoothd` would.
    private func sent(_ message: OpaquePointer) {
        switch dbus_message_get_type(message) {
        case ABLE_DBUS_MESSAGE_TYPE_METHOD_RETURN, ABLE_DBUS_MESSAGE_TYPE_ERROR:
            let serial = dbus_message_get_reply_serial(message)
            state.withLock { state in
                state.replies[serial, default: 0] += 1
                state.awaited.remove(serial)
            }
            progress.signal()
        case ABLE_DBUS_MESSAGE_TYPE_METHOD_CALL:
            answer(message)
        default:
            break
        }
    }

    private func answer(_ call: OpaquePointer) {
        let destination = dbus_message_get_destination(call).map { String(cString: $0) } ?? ""
        let member = dbus_message_get_member(call).map { String(cString: $0) } ?? ""
        guard dbus_message_get_no_reply(call) == 0, let reply = dbus_message_new_method_return(call) else { return }
        defer { dbus_message_unref(reply) }
        let arguments: [DBusValue]
        if destination == "org.freedesktop.DBus" {
            dbus_message_set_sender(reply, "org.freedesktop.DBus")
            arguments = member == "GetNameOwner" ? [.string(Self.bluez)] : []
        } else {
            dbus_message_set_sender(reply, Self.bluez)
            switch member {
            case "GetManagedObjects": arguments = [Self.managedObjects]
            case "GetAll": arguments = [FuzzMessages.properties([])]
            default: arguments = []
            }
        }
        do { try MessageCoding.append(arguments, to: reply) } catch { fatalError("\(error)") }
        connection.deliver(reply)
    }

    /// `bluetoothd`'s objects: one adapter with a GATT manager and an advertising manager.
    static let managedObjects = DBusValue.dictionary(
        key: .objectPath, value: "a{sa{sv}}",
        [
            DBusDictionaryEntry(
                key: .objectPath(adapter),
                value: .dictionary(
                    key: .string, value: "a{sv}",
                    [
                        DBusDictionaryEntry(
                            key: .string("org.bluez.Adapter1"),
                            value: FuzzMessages.properties([
                                ("Address", .string("00:AA:01:00:00:00")), ("Name", .string("fuzz")),
                                ("Alias", .string("fuzz")), ("Powered", .boolean(true)),
                                ("Discovering", .boolean(false)), ("Modalias", .string("usb:v1D6Bp0246d0552")),
                            ])),
                        DBusDictionaryEntry(key: .string("org.bluez.GattManager1"), value: FuzzMessages.properties([])),
                        DBusDictionaryEntry(
                            key: .string("org.bluez.LEAdvertisingManager1"),
                            value: FuzzMessages.properties([
                                ("SupportedInstances", .byte(4)), ("ActiveInstances", .byte(0)),
                                ("SupportedIncludes", .array(.string, [.string("tx-power")])),
                            ])),
                    ])),
            DBusDictionaryEntry(
                key: .objectPath("/org/bluez"),
                value: .dictionary(
                    key: .string, value: "a{sv}",
                    [
                        DBusDictionaryEntry(
                            key: .string("org.bluez.AgentManager1"), value: FuzzMessages.properties([]))
                    ])),
        ])

    // MARK: One input

    func run(_ input: [UInt8]) {
        var builder = CallBuilder(values: FuzzValueBuilder(FuzzReader(input)), objects: objects)
        var calls: [OpaquePointer] = []
        while !builder.values.reader.isAtEnd, calls.count < 32 {
            guard let call = builder.call() else { continue }
            nextSerial &+= 1
            dbus_message_set_serial(call, nextSerial)
            let wantsReply = dbus_message_get_no_reply(call) == 0
            state.withLock { state in
                state.delivered[nextSerial] = wantsReply
                if wantsReply { state.awaited.insert(nextSerial) }
            }
            calls.append(call)
        }
        for call in calls {
            connection.deliver(call)
            dbus_message_unref(call)
        }
        // Every call awaiting a reply gets one; then what the loop still holds is run.
        while state.withLock({ !$0.awaited.isEmpty }) {
            if progress.wait(timeout: .now() + .seconds(30)) == .timedOut {
                fatalError("calls left unanswered: \(state.withLock { $0.awaited.sorted() })")
            }
        }
        for _ in 0..<3 { _ = onLoop { 0 } }
        state.withLock { state in
            for (serial, wantsReply) in state.delivered {
                let replies = state.replies[serial] ?? 0
                guard replies == (wantsReply ? 1 : 0) else {
                    fatalError("call \(serial) got \(replies) replies (\(wantsReply ? "one" : "none") asked for)")
                }
            }
            state.delivered.removeAll()
            state.replies.removeAll()
        }
        while progress.wait(timeout: .now()) == .success {}
        let now = counts()
        guard now == baseline else { fatalError("left over after the input: \(now), before: \(baseline!)") }
    }
}

/// Builds method calls from a fuzzer's choices.
private struct CallBuilder {
    var values: FuzzValueBuilder
    let objects: [DBusObjectPath]

    static let interfaces = [
        "org.bluez.GattCharacteristic1", "org.bluez.GattDescriptor1", "org.bluez.Agent1", "org.bluez.LEAdvertisement1",
        "org.freedesktop.DBus.Properties", "org.freedesktop.DBus.Introspectable",
        "org.freedesktop.DBus.ObjectManager", "org.freedesktop.DBus.Peer", "org.bluez.GattService1", "",
    ]
    static let members = [
        "ReadValue", "WriteValue", "StartNotify", "StopNotify", "Confirm", "AcquireNotify", "AcquireWrite",
        "Release", "Cancel", "RequestConfirmation", "RequestAuthorization", "AuthorizeService", "RequestPasskey",
        "RequestPinCode", "DisplayPasskey", "DisplayPinCode", "Get", "GetAll", "Set", "Introspect",
        "GetManagedObjects", "Ping", "GetMachineId", "Odd",
    ]
    static let senders = [Harness.bluez, Harness.bluez, Harness.bluez, ":1.99", "org.bluez", "org.example.Other"]
    static let optionKeys = ["offset", "device", "mtu", "type", "link", "prepare-authorize", "x"]

    /// One call: the first byte's bits choose its sender, whether it asks for no reply, whether
    /// its arguments have the member's shape, and whether its path is an exported object's.
    mutating func call() -> OpaquePointer? {
        let choice = values.reader.byte()
        let path: DBusObjectPath =
            choice & 0x10 == 0 && !objects.isEmpty
            ? objects[Int(values.reader.byte()) % objects.count] : values.path()
        let interface = Self.interfaces[Int(values.reader.byte()) % Self.interfaces.count]
        let member = Self.members[Int(values.reader.byte()) % Self.members.count]
        guard
            let call = dbus_message_new_method_call(
                choice & 0x20 == 0 ? ":1.42" : nil, path.rawValue, interface.isEmpty ? nil : interface, member)
        else { return nil }
        dbus_message_set_sender(call, Self.senders[Int(choice & 0x07) % Self.senders.count])
        if choice & 0x08 != 0, choice & 0x40 != 0 { dbus_message_set_no_reply(call, 1) }
        let arguments = choice & 0x80 == 0 ? shaped(member, interface: interface) : values.arguments()
        do {
            try MessageCoding.append(arguments, to: call)
        } catch {
            dbus_message_unref(call)
            return nil
        }
        return call
    }

    /// Arguments in the shape the member takes.
    private mutating func shaped(_ member: String, interface: String) -> [DBusValue] {
        switch member {
        case "ReadValue", "AcquireNotify", "AcquireWrite": return [options()]
        case "WriteValue": return [.bytes(values.reader.chunk()), options()]
        case "RequestConfirmation": return [.objectPath(values.path()), .uint32(values.reader.uint32())]
        case "RequestAuthorization", "RequestPasskey", "RequestPinCode": return [.objectPath(values.path())]
        case "AuthorizeService", "DisplayPinCode": return [.objectPath(values.path()), .string(values.string())]
        case "DisplayPasskey":
            return [.objectPath(values.path()), .uint32(values.reader.uint32()), .uint16(values.reader.uint16())]
        case "Get": return [.string(anInterface()), .string(values.string())]
        case "GetAll": return [.string(anInterface())]
        case "Set": return [.string(anInterface()), .string(values.string()), .variant(values.value(depth: 1))]
        default: return []
        }
    }

    private mutating func anInterface() -> String {
        let choice = values.reader.byte()
        return choice < 0xC0 ? Self.interfaces[Int(choice) % Self.interfaces.count] : values.string()
    }

    /// GATT request options: BlueZ's keys with their types, now and then another type.
    private mutating func options() -> DBusValue {
        let count = Int(values.reader.byte() % 5)
        return FuzzMessages.properties(
            (0..<count).map { _ in
                let choice = values.reader.byte()
                let key = Self.optionKeys[Int(choice) % Self.optionKeys.count]
                guard choice & 0x80 == 0 else { return (key, values.value(depth: 1)) }
                switch key {
                case "offset", "mtu": return (key, .uint16(values.reader.uint16()))
                case "device": return (key, .objectPath(values.path()))
                case "prepare-authorize": return (key, .boolean(values.reader.byte() & 1 == 1))
                default:
                    return (
                        key, .string(["request", "command", "reliable", "LE", "BR/EDR"][Int(values.reader.byte()) % 5])
                    )
                }
            })
    }
}

/// Seeds: a read, a write, a subscription, an agent's confirmation, property reads, an
/// advertisement's release, each from BlueZ, and a call from a stranger.
private let seeds: [(String, [UInt8])] = [
    ("read", [0x00, 3, 0, 0, 2, 0x00, 0x40, 0x01, 0x00]),
    ("write", [0x00, 3, 0, 1, 3, 1, 2, 3, 1, 0x06, 0x00]),
    ("notify", [0x00, 5, 0, 2, 0x00, 6, 0, 3]),
    ("acquire-notify", [0x00, 5, 0, 5, 2, 0x01, 5, 0x02, 0x17, 0x00]),
    ("agent", [0x00, 0, 2, 9, 5, 1, 2, 3, 4, 0x00, 0, 2, 12, 5]),
    ("properties", [0x00, 1, 4, 17, 0, 0x00, 2, 4, 16, 2, 0]),
    ("advertisement", [0x00, 9, 3, 7]),
    ("stranger", [0x03, 3, 0, 0, 0]),
    ("no-reply", [0x48, 3, 0, 0, 0, 0x00, 0, 5, 19]),
]
