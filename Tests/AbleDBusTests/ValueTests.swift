import AbleDBus
import AbleTestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ValueTests {
    static let samples: [DBusValue] = [
        .byte(0xFE), .boolean(true), .boolean(false), .int16(-12), .uint16(65535), .int32(-1), .uint32(4_000_000_000),
        .int64(.min), .uint64(.max), .double(3.25), .string(""), .string("héllo ✓"), .objectPath("/org/bluez/hci0"),
        .signature("a{sv}"), .bytes([]), .bytes(Array(0...255)), .array(.string, []),
        .array(.string, [.string("a"), .string("b")]),
        .dictionary(
            key: .string, value: .variant,
            [DBusDictionaryEntry(key: .string("Value"), value: .variant(.bytes([1, 2, 3])))]),
        .dictionary(key: .objectPath, value: "a{sa{sv}}", []),
        .structure([.string("x"), .uint32(1), .array(.int16, [.int16(3)])]),
        .variant(.variant(.string("nested"))),
        .array("(yv)", [.structure([.byte(1), .variant(.double(0.5))])]),
    ]

    @Test(arguments: samples)
    func everyTypeSurvivesARoundTripThroughTheDaemon(value: DBusValue) async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let reply = try await EchoService.call(client, on: server, "Echo", [.variant(value)])
            #expect(reply == [.variant(value)])
            if case .variant(let inner) = reply.first {
                #expect(inner.signature == value.signature)
            }
        }
    }

    @Test func swiftTypesConvertBothWays() throws {
        let properties: [String: DBusVariant] = ["Name": DBusVariant("hci0"), "Powered": DBusVariant(true)]
        #expect(properties.dbusValue.signature == "a{sv}")
        let decoded = try properties.dbusValue.decode([String: DBusVariant].self)
        #expect(try decoded.decode("Name", as: String.self) == "hci0")
        #expect(try decoded.decode("Powered", as: Bool.self) == true)
        #expect(try decoded.decode("Missing", as: Bool.self) == nil)
        #expect([UInt8]([1, 2]).dbusValue == .bytes([1, 2]))
        #expect(try DBusValue.bytes([9]).decode([UInt8].self) == [9])
        #expect(try DBusValue.array(.uint32, [.uint32(1)]).decode([UInt32].self) == [1])
        #expect([String].dbusSignature == "as")
    }

    @Test func aValueOfTheWrongTypeThrowsAnErrorNamingWhatWasExpected() throws {
        let properties: [String: DBusVariant] = ["Powered": DBusVariant(.string("yes"))]
        let error = #expect(throws: DBusError.self) { try properties.decode("Powered", as: Bool.self) }
        #expect(error?.name == .invalidArgs)
        #expect(error?.message.contains("Powered") == true)
        #expect(error?.message.contains("boolean") == true)
        #expect(throws: DBusError.self) { try DBusValue.uint32(1).decode([String: DBusVariant].self) }
        #expect(throws: DBusError.self) { try DBusValue.array(.string, []).decode([UInt32].self) }
    }

    @Test func aPeerSendingTheWrongTypeGetsAnErrorNotACrash() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export(
                [
                    DBusInterface(
                        "org.example.Strict",
                        methods: [
                            DBusMethod("Take", in: "v", out: "u") { call in
                                let inner = try call.argument(0, as: DBusVariant.self)
                                return [.uint32(try inner.decode(UInt32.self) + 1)]
                            }
                        ])
                ], at: "/strict")
            let error = await #expect(throws: DBusError.self) {
                try await client.call(
                    destination: server.uniqueName, path: "/strict", interface: "org.example.Strict", method: "Take",
                    arguments: [.variant(.string("seven"))])
            }
            #expect(error?.name == .invalidArgs)
            #expect(error?.message.contains("uint32") == true)
            let reply = try await client.call(
                destination: server.uniqueName, path: "/strict", interface: "org.example.Strict", method: "Take",
                arguments: [.variant(.uint32(7))])
            #expect(reply == [.uint32(8)])
        }
    }

    @Test(arguments: [
        ("", [String]()), ("sa{sv}as", ["s", "a{sv}", "as"]), ("(oa{sa{sv}})aay", ["(oa{sa{sv}})", "aay"]),
    ])
    func signaturesSplitIntoCompleteTypes(signature: String, parts: [String]) throws {
        let parsed = try #require(DBusSignature(rawValue: signature))
        #expect(parsed.completeTypes.map(\.rawValue) == parts)
        #expect(parts.indices.map { parsed.completeType(at: $0)?.rawValue } == parts)
        #expect(parsed.completeType(at: parts.count) == nil)
    }

    /// Empty arrays passed as arguments, not inside a variant, arrive with their element
    /// signatures, which are read off the message's signature: both ways, between other arguments.
    /// Long strings and object paths are taken from a cache of recent ones, on the way in (the
    /// server's arguments) and back (the client's reply): each message must still get its own.
    @Test func longStringsRepeatedAcrossMessagesArriveAsSent() async throws {
        // Same lengths with other bytes, one byte apart, inline and long, repeated and evicted.
        var texts = (0..<12).map { "org.example.Interface\($0 % 10)" } + ["org.example.Interface"]
        texts += [
            "org.example.InterfacX", "short", "", "org.example.Interface3", "ü" + String(repeating: "x", count: 19),
        ]
        let paths = try (0..<12).map {
            try #require(DBusObjectPath(rawValue: "/org/bluez/hci0/dev_00_AA_01_01_00_\(10 + $0 % 11)"))
        }
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            let received = Locked<[[DBusValue]]>([])
            try await server.export(
                [
                    DBusInterface(
                        "org.example.Strings",
                        methods: [
                            DBusMethod("Echo", in: "saoo", out: "saoo") { call in
                                received.value.append(call.arguments)
                                return call.arguments
                            }
                        ])
                ], at: "/strings")
            for (index, text) in texts.enumerated() {
                let arguments: [DBusValue] = [
                    .string(text), .array(.objectPath, paths.prefix(index % 4 + 1).map(DBusValue.objectPath)),
                    .objectPath(paths[index % paths.count]),
                ]
                let reply = try await client.call(
                    destination: server.uniqueName, path: "/strings", interface: "org.example.Strings", method: "Echo",
                    arguments: arguments)
                #expect(reply == arguments)
                #expect(received.value.last == arguments)
            }
        }
    }

    @Test func emptyArgumentArraysKeepTheirSignatures() async throws {
        let arguments: [DBusValue] = [
            .string("first"), .dictionary(key: .string, value: .variant, []), .array("as", []), .bytes([]),
            .uint32(7), .array("(si)", []), .dictionary(key: .objectPath, value: "a{sa{sv}}", []),
            .array(.string, [.string("last")]),
        ]
        let signature = try #require(DBusSignature(rawValue: arguments.map(\.signature.rawValue).joined()))
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            let received = Locked<[DBusValue]>([])
            try await server.export(
                [
                    DBusInterface(
                        "org.example.Empty",
                        methods: [
                            DBusMethod("Echo", in: signature, out: signature) { call in
                                received.value = call.arguments
                                return call.arguments
                            }
                        ])
                ], at: "/empty")
            let reply = try await client.call(
                destination: server.uniqueName, path: "/empty", interface: "org.example.Empty", method: "Echo",
                arguments: arguments)
            #expect(received.value == arguments)
            #expect(reply == arguments)
            #expect(reply.map(\.signature) == arguments.map(\.signature))
        }
    }

    @Test(arguments: ["a", "a{vs}", "(", "{ss}", "z"])
    func invalidSignaturesAreRejected(text: String) {
        #expect(DBusSignature(rawValue: text) == nil)
    }

    @Test(arguments: ["", "org", "/a//b", "/a/", "/a-b", "/é"])
    func invalidObjectPathsAreRejected(text: String) {
        #expect(DBusObjectPath(rawValue: text) == nil)
    }

    @Test func objectPathsKnowTheirFamily() throws {
        let path: DBusObjectPath = "/org/bluez/hci0/dev_00_AA"
        #expect(path.parent == "/org/bluez/hci0")
        #expect(path.lastElement == "dev_00_AA")
        #expect(DBusObjectPath("/org").lastElement == "org")
        #expect(DBusObjectPath.root.lastElement == "")
        #expect(path.isDescendant(of: "/org/bluez"))
        #expect(!DBusObjectPath("/org/bluez/hci01").isDescendant(of: "/org/bluez/hci0"))
        #expect(DBusObjectPath.root.appending("org") == "/org")
    }

    @Test func matchRulesQuoteTheirValues() {
        let rule = DBusMatchRule(
            sender: "org.bluez", pathNamespace: "/org/bluez", interface: "org.bluez.Device1", arguments: [0: "it's"])
        #expect(
            rule.description
                == "type='signal',sender='org.bluez',path_namespace='/org/bluez',interface='org.bluez.Device1',arg0='it'\\''s'"
        )
    }
}
