import AbleDBus
import AbleTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Method calls read in place (`DBusMethodCallView`), as Able's GATT server reads BlueZ's requests.
@Suite(.timeLimit(.minutes(1)))
struct MethodCallViewTests {
    /// What a view read from the `aya{sv}` of a `WriteValue`-like call, entry by entry.
    struct Reading: Sendable, Equatable {
        var bytes: [UInt8]
        var entries: [String]
    }

    /// Reads every entry with every accessor: only the one of the value's type gives a value.
    static func read(_ call: DBusMethodCallView) throws -> Reading {
        var entries: [String] = []
        try call.forEachEntry(ofDictionary: 1) { key, value in
            let name = String(cString: key)
            if let number = value.uint16() { entries.append("\(name) q \(number)") }
            if let flag = value.boolean() { entries.append("\(name) b \(flag)") }
            if let text = value.string() { entries.append("\(name) s \(text)") }
            if let path = value.withObjectPath({ String(decoding: $0, as: UTF8.self) }) {
                entries.append("\(name) o \(path)")
            }
            if let bytes = value.bytes() { entries.append("\(name) ay \(bytes)") }
            if value.uint16() == nil && value.boolean() == nil && value.string() == nil
                && value.withObjectPath({ _ in true }) == nil && value.bytes() == nil
            {
                entries.append("\(name) other")
            }
        }
        return Reading(bytes: try call.bytes(argument: 0), entries: entries)
    }

    // Computed, not kept in statics: LeakSanitizer cannot see a DBusValue's boxes through the
    // case bits in their addresses, and would report a static's values as leaks.
    static var options: DBusValue {
        DBusValue.dictionary(
            key: .string, value: .variant,
            [
                ("device", DBusValue.objectPath("/org/bluez/hci1/dev_00_AA_01_00_00_01")), ("mtu", .uint16(247)),
                ("link", .string("LE")), ("prepare-authorize", .boolean(true)), ("value", .bytes([])),
                ("long", .bytes(Array(0..<40))), ("count", .uint32(3)), ("nested", .variant(.uint16(1))),
            ].map { DBusDictionaryEntry(key: .string($0.0), value: .variant($0.1)) })
    }

    static var expected: Reading {
        Reading(
            bytes: [1, 2, 3],
            entries: [
                "device o /org/bluez/hci1/dev_00_AA_01_00_00_01", "mtu q 247", "link s LE", "prepare-authorize b true",
                "value ay []", "long ay \(Array(0..<40) as [UInt8])", "count other", "nested q 1",
            ])
    }

    @Test func everyEntryIsReadInPlaceByItsType() throws {
        let reading = try DBusMethodCallView.withCall(
            path: "/able/char0", interface: "org.example.Char", member: "WriteValue",
            arguments: [.bytes([1, 2, 3]), Self.options], Self.read)
        #expect(reading == Self.expected)
        let empty = try DBusMethodCallView.withCall(
            path: "/able/char0", interface: "org.example.Char", member: "WriteValue",
            arguments: [.bytes([]), .dictionary(key: .string, value: .variant, [])], Self.read)
        #expect(empty == Reading(bytes: [], entries: []))
    }

    @Test func argumentsOfAnotherShapeAreInvalid() throws {
        let cases: [[DBusValue]] = [
            [], [.bytes([1])], [.string("x"), Self.options], [.bytes([1]), .bytes([2])],
            // Empty dictionaries of other types: no entry to tell, only the signature.
            [.bytes([1]), .dictionary(key: .string, value: .string, [])],
            [.bytes([1]), .dictionary(key: .objectPath, value: .variant, [])],
        ]
        for arguments in cases {
            let error = #expect(throws: DBusError.self, "\(arguments)") {
                try DBusMethodCallView.withCall(
                    path: "/able/char0", interface: "org.example.Char", member: "WriteValue", arguments: arguments,
                    Self.read)
            }
            #expect(error?.name == .invalidArgs)
            #expect(
                error?.message.hasPrefix("WriteValue: ") == true && error?.message.contains("argument") == true,
                "\(String(describing: error))")
        }
    }

    /// An in-place method answers over the bus from the message itself, and the same method
    /// answers a call made without a bus through its `handler`, alike.
    @Test func anInPlaceMethodAnswersOverTheBusAndWithout() async throws {
        let senders = Locked<[String]>([])
        let method = DBusMethod.immediateInPlace("WriteValue", in: "aya{sv}", out: "as") { call in
            senders.value.append(call.sender)
            return [.array(.string, try Self.read(call).entries.map { .string($0) })]
        }
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([DBusInterface("org.example.Char", methods: [method])], at: "/able/char0")
            let reply = try await client.call(
                destination: server.uniqueName, path: "/able/char0", interface: "org.example.Char",
                method: "WriteValue", arguments: [.bytes([1, 2, 3]), Self.options])
            #expect(reply == [.array(.string, Self.expected.entries.map { .string($0) })])
            #expect(senders.value == [client.uniqueName])

            let refused = await #expect(throws: DBusError.self) {
                try await client.call(
                    destination: server.uniqueName, path: "/able/char0", interface: "org.example.Char",
                    method: "WriteValue", arguments: [.bytes([1])])
            }
            #expect(refused?.name == .invalidArgs)
        }
        guard case .immediate(let handler) = method.handler else {
            Issue.record("an in-place method's handler is not immediate")
            return
        }
        let direct = try handler(
            DBusMethodCall(
                sender: ":1.7", path: "/able/char0", interface: "org.example.Char", member: "WriteValue",
                arguments: [.bytes([1, 2, 3]), Self.options]))
        #expect(direct == [.array(.string, Self.expected.entries.map { .string($0) })])
        #expect(senders.value.last == ":1.7")
    }
}
