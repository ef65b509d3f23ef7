import Able
import AbleDBus
import Testing

@testable import AbleBlueZ

struct GATTRequestOptionsTests {
    /// The options of argument `index`, read from the decoded call and in place from a message
    /// with the same arguments: the two must agree.
    static func options(_ call: DBusMethodCall, argument index: Int) throws -> GATTRequestOptions {
        let decoded = Result { () throws(DBusError) in try GATTRequestOptions(call, argument: index) }
        let inPlace = try DBusMethodCallView.withCall(
            path: call.path, interface: call.interface, member: call.member, arguments: call.arguments
        ) { view in Result { () throws(DBusError) in try GATTRequestOptions(view, argument: index) } }
        switch (decoded, inPlace) {
        case (.success(let decoded), .success(let inPlace)):
            #expect(decoded == inPlace, "decoded \(decoded), read in place \(inPlace)")
            return decoded
        case (.failure(let decoded), .failure(let inPlace)):
            #expect(decoded.name == inPlace.name)
            throw decoded
        default:
            Issue.record("decoded: \(decoded), read in place: \(inPlace)")
            return try decoded.get()
        }
    }

    static func call(_ entries: [(String, DBusValue)], member: String = "WriteValue") -> DBusMethodCall {
        let options = DBusValue.dictionary(
            key: .string, value: .variant, entries.map { DBusDictionaryEntry(key: .string($0), value: .variant($1)) })
        return DBusMethodCall(
            sender: ":1.1", path: "/able/gatt_1/service0/char0", interface: "org.bluez.GattCharacteristic1",
            member: member, arguments: [.bytes([1]), options])
    }

    @Test("Every option bluetoothd sends is read in one pass")
    func everyOptionIsRead() throws {
        let options = try Self.options(
            Self.call([
                ("device", .objectPath("/org/bluez/hci1/dev_00_AA_01_00_00_01")), ("link", .string("LE")),
                ("mtu", .uint16(247)), ("offset", .uint16(5)), ("type", .string("reliable")),
                ("prepare-authorize", .boolean(true)),
            ]), argument: 1)
        #expect(options.central?.address == "00:AA:01:00:00:01")
        #expect(options.mtu == 247)
        #expect(options.offset == 5)
        #expect(options.writeKind == .reliable)
        #expect(options.prepareAuthorize)
    }

    @Test("Absent options take their defaults")
    func absentOptions() throws {
        let options = try Self.options(Self.call([]), argument: 1)
        #expect(options.central == nil)
        #expect(options.mtu == nil)
        #expect(options.offset == 0)
        #expect(options.writeKind == .request)
        #expect(!options.prepareAuthorize)
    }

    @Test("An option of an unexpected type is ignored, as if absent")
    func unexpectedTypesAreIgnored() throws {
        let options = try Self.options(
            Self.call([
                ("device", .string("/org/bluez/hci1/dev_00_AA_01_00_00_01")), ("mtu", .uint32(247)),
                ("offset", .int16(5)), ("type", .uint16(1)), ("prepare-authorize", .string("yes")),
            ]), argument: 1)
        #expect(options.central == nil)
        #expect(options.mtu == nil)
        #expect(options.offset == 0)
        #expect(options.writeKind == .request)
        #expect(!options.prepareAuthorize)
    }

    @Test(
        "A device path that names no device gives no central", arguments: ["/org/bluez/hci1", "/org/bluez/hci1/dev_00"])
    func aPathThatNamesNoDevice(path: String) throws {
        let options = try Self.options(
            Self.call([("device", .objectPath(try #require(DBusObjectPath(rawValue: path))))]), argument: 1)
        #expect(options.central == nil)
    }

    @Test("Missing options, or a value that is not a{sv}, are invalid arguments")
    func missingOrMalformedOptions() {
        let call = Self.call([])
        #expect(throws: DBusError.self) { try Self.options(call, argument: 2) }
        #expect(throws: DBusError.self) { try Self.options(call, argument: 0) }
        let error = #expect(throws: DBusError.self) { try Self.options(call, argument: 0) }
        #expect(error?.name == .invalidArgs)
    }
}
