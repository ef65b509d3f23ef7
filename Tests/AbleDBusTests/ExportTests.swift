import AbleDBus
import AbleTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.timeLimit(.minutes(1)))
struct ExportTests {
    static let thermometer = "org.example.Thermometer"

    /// An object with a read-only `Unit`, a writable `Celsius` (int16), and a write-only-by-method `Reset`.
    static func thermometerInterface(_ celsius: Locked<Int16>) -> DBusInterface {
        DBusInterface(
            thermometer,
            methods: [
                DBusMethod.immediate("Reset") { _ in
                    celsius.value = 0; return []
                }
            ],
            properties: [
                .constant("Unit", "celsius"),
                DBusProperty(
                    "Celsius", signature: .int16, get: { .int16(celsius.value) },
                    set: { _, value in
                        let newValue = try value.decode(Int16.self)
                        guard newValue > -274 else { throw DBusError(.invalidArgs, "below absolute zero") }
                        celsius.value = newValue
                    }),
            ],
            signals: [DBusSignalDeclaration("Alarm", signature: "s")])
    }

    func properties(_ client: DBusConnection, _ server: DBusConnection, _ method: String, _ arguments: [DBusValue])
        async throws -> [DBusValue]
    {
        try await client.call(
            destination: server.uniqueName, path: "/thermo", interface: "org.freedesktop.DBus.Properties",
            method: method, arguments: arguments)
    }

    @Test func propertiesCanBeReadListedAndWritten() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            let celsius = Locked<Int16>(21)
            try await server.export([Self.thermometerInterface(celsius)], at: "/thermo")
            let changes = try await client.signals(
                matching: DBusMatchRule(
                    path: "/thermo", interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))

            let unit = try await properties(client, server, "Get", [.string(Self.thermometer), .string("Unit")])
            #expect(unit == [.variant(.string("celsius"))])

            let all = try await properties(client, server, "GetAll", [.string(Self.thermometer)])
            let dictionary = try all[0].decode([String: DBusVariant].self)
            #expect(try dictionary.decode("Celsius", as: Int16.self) == 21)
            #expect(try dictionary.decode("Unit", as: String.self) == "celsius")

            _ = try await properties(
                client, server, "Set", [.string(Self.thermometer), .string("Celsius"), .variant(.int16(30))])
            #expect(celsius.value == 30)

            for try await signal in changes {
                #expect(signal.arguments[0] == .string(Self.thermometer))
                let changed = try signal.arguments[1].decode([String: DBusVariant].self)
                #expect(try changed.decode("Celsius", as: Int16.self) == 30)
                break
            }
        }
    }

    @Test func badPropertyAccessGetsTheStandardErrors() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            let celsius = Locked<Int16>(21)
            try await server.export([Self.thermometerInterface(celsius)], at: "/thermo")
            let cases: [(String, [DBusValue], DBusError.Name)] = [
                ("Get", [.string(Self.thermometer), .string("Kelvin")], .unknownProperty),
                ("Get", [.string("org.example.None"), .string("Unit")], .unknownInterface),
                ("Set", [.string(Self.thermometer), .string("Unit"), .variant(.string("kelvin"))], .propertyReadOnly),
                ("Set", [.string(Self.thermometer), .string("Celsius"), .variant(.string("warm"))], .invalidArgs),
                ("Set", [.string(Self.thermometer), .string("Celsius"), .variant(.int16(-300))], .invalidArgs),
            ]
            for (method, arguments, expected) in cases {
                let error = await #expect(throws: DBusError.self) {
                    try await properties(client, server, method, arguments)
                }
                #expect(error?.name == expected, "\(method) \(arguments)")
            }
            #expect(celsius.value == 21)
        }
    }

    @Test func anObjectManagerListsItsObjectsAndAnnouncesChanges() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.exportObjectManager(at: "/app")
            let announcements = try await client.signals(
                matching: DBusMatchRule(sender: server.uniqueName, interface: "org.freedesktop.DBus.ObjectManager"))
            let celsius = Locked<Int16>(5)
            try await server.export([Self.thermometerInterface(celsius)], at: "/app/thermo0")

            let reply = try await client.call(
                destination: server.uniqueName, path: "/app", interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects")
            let objects = try reply[0].decode([DBusObjectPath: [String: [String: DBusVariant]]].self)
            #expect(Array(objects.keys) == ["/app/thermo0"])
            #expect(try objects["/app/thermo0"]?[Self.thermometer]?.decode("Celsius", as: Int16.self) == 5)

            #expect(await server.unexport("/app/thermo0"))
            var members: [String] = []
            for try await signal in announcements {
                members.append(signal.member)
                #expect(signal.arguments[0] == .objectPath("/app/thermo0"))
                if members.count == 2 { break }
            }
            #expect(members == ["InterfacesAdded", "InterfacesRemoved"])
            let unknown = await #expect(throws: DBusError.self) {
                try await properties(client, server, "GetAll", [.string(Self.thermometer)])
            }
            #expect(unknown?.name == .unknownObject)
        }
    }

    @Test func introspectionDescribesObjectsAndChildren() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([Self.thermometerInterface(Locked<Int16>(0))], at: "/app/thermo0")
            func introspect(_ path: DBusObjectPath) async throws -> String {
                try await client.call(
                    destination: server.uniqueName, path: path, interface: "org.freedesktop.DBus.Introspectable",
                    method: "Introspect")[0].decode()
            }
            let object = try await introspect("/app/thermo0")
            #expect(object.contains("<interface name=\"org.example.Thermometer\">"))
            #expect(object.contains("<property name=\"Celsius\" type=\"n\" access=\"readwrite\"/>"))
            #expect(object.contains("<method name=\"Reset\">"))
            #expect(try await introspect("/").contains("<node name=\"app\"/>"))
            #expect(try await introspect("/app").contains("<node name=\"thermo0\"/>"))
        }
    }

    @Test func callsFromUnauthorizedSendersAreRefusedAndChangeNothing() async throws {
        try await withPrivateBus { bus, server in
            let trusted = try await bus.connect()
            let stranger = try await bus.connect()
            let celsius = Locked<Int16>(21)
            let trustedName = trusted.uniqueName
            try await server.export(
                [Self.thermometerInterface(celsius)], at: "/thermo", authorize: { $0 == trustedName })
            for (method, arguments) in [
                ("Set", [DBusValue.string(Self.thermometer), .string("Celsius"), .variant(.int16(99))]),
                ("Get", [.string(Self.thermometer), .string("Celsius")]),
            ] {
                let error = await #expect(throws: DBusError.self) {
                    try await properties(stranger, server, method, arguments)
                }
                #expect(error?.name == .accessDenied)
            }
            let reset = await #expect(throws: DBusError.self) {
                try await stranger.call(
                    destination: server.uniqueName, path: "/thermo", interface: Self.thermometer, method: "Reset")
            }
            #expect(reset?.name == .accessDenied)
            #expect(celsius.value == 21)
            _ = try await trusted.call(
                destination: server.uniqueName, path: "/thermo", interface: Self.thermometer, method: "Reset")
            #expect(celsius.value == 0)
        }
    }

    @Test func exportingTwiceAtOnePathIsRefused() async throws {
        try await withPrivateBus { _, server in
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            await #expect(throws: DBusError.self) {
                try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            }
        }
    }

    @Test func fileDescriptorsPassBothWays() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export(
                [
                    DBusInterface(
                        "org.example.Pipe",
                        methods: [
                            // Reads what the caller's descriptor holds, and hands back a new one.
                            DBusMethod("Swap", in: "h", out: "sh") { call in
                                let received = try call.argument(0, as: DBusFileDescriptor.self)
                                let fd = try #require(received.take())
                                defer { close(fd) }
                                var buffer = [UInt8](repeating: 0, count: 64)
                                let count = read(fd, &buffer, buffer.count)
                                var fds: [Int32] = [0, 0]
                                guard pipe(&fds) == 0 else { throw DBusError(.failed, "pipe") }
                                _ = "from server".withCString { write(fds[1], $0, 11) }
                                close(fds[1])
                                return [
                                    .string(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self)),
                                    .unixFD(DBusFileDescriptor(owning: fds[0])),
                                ]
                            }
                        ])
                ], at: "/pipe")
            var fds: [Int32] = [0, 0]
            #expect(pipe(&fds) == 0)
            _ = "from client".withCString { write(fds[1], $0, 11) }
            close(fds[1])
            let reply = try await client.call(
                destination: server.uniqueName, path: "/pipe", interface: "org.example.Pipe", method: "Swap",
                arguments: [.unixFD(DBusFileDescriptor(owning: fds[0]))])
            #expect(reply[0] == .string("from client"))
            let descriptor = try reply[1].decode(DBusFileDescriptor.self)
            let fd = try #require(descriptor.take())
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = read(fd, &buffer, buffer.count)
            #expect(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self) == "from server")
        }
    }

    /// An early answer replies at once and cancels the handler, whose own answer is then dropped;
    /// one given after the handler answered changes nothing. One given before the handler first
    /// suspends (here by the handler itself) cancels the handler's task as soon as there is one.
    @Test func anAsyncHandlersCallCanBeAnsweredEarly() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            let answers = Locked<[DBusEarlyAnswer]>([])
            let events = Locked<[String]>([])
            try await server.export(
                [
                    DBusInterface(
                        "org.example.Early",
                        methods: [
                            DBusMethod("Slow", in: "", out: "s") { call in
                                answers.value.append(try #require(call.earlyAnswer))
                                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                                events.value.append("cancelled")
                                return [.string("late")]
                            },
                            DBusMethod("Fast", in: "", out: "s") { call in
                                answers.value.append(try #require(call.earlyAnswer))
                                return [.string("fast")]
                            },
                            DBusMethod("AnswersItself", in: "", out: "s") { call in
                                try #require(call.earlyAnswer).fail(DBusError(.failed, "answered before suspending"))
                                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                                events.value.append("cancelled before suspending")
                                return [.string("late")]
                            },
                        ])
                ], at: "/early")
            let call = { @Sendable (method: String) in
                try await client.call(
                    destination: server.uniqueName, path: "/early", interface: "org.example.Early", method: method)
            }
            let slow = Task { try await call("Slow") }
            try await waitUntil { answers.value.count == 1 }
            answers.value[0].fail(DBusError(DBusError.Name(rawValue: "org.example.Error.Early"), "answered early"))
            let error = await #expect(throws: DBusError.self) { try await slow.value }
            #expect(error?.name.rawValue == "org.example.Error.Early")
            #expect(error?.message == "answered early")
            try await waitUntil { events.value == ["cancelled"] }

            #expect(try await call("Fast") == [.string("fast")])
            answers.value[1].fail(DBusError(.failed, "too late"))
            answers.value[0].fail(DBusError(.failed, "twice"))
            #expect(try await call("Fast") == [.string("fast")])

            let early = await #expect(throws: DBusError.self) { try await call("AnswersItself") }
            #expect(early?.message == "answered before suspending")
            try await waitUntil { events.value == ["cancelled", "cancelled before suspending"] }
        }
    }

    /// Async handlers start on the connection's queue: one that answers without suspending, one
    /// that sleeps, one that calls the bus through its own connection and one that throws are all
    /// answered, many at once, each with its own answer.
    @Test func asyncHandlersAnswerWhetherOrNotTheySuspend() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export(
                [
                    DBusInterface(
                        "org.example.Handlers",
                        methods: [
                            DBusMethod("AtOnce", in: "u", out: "u") { call in
                                [.uint32(try call.argument(0, as: UInt32.self) + 1)]
                            },
                            DBusMethod("AfterSleeping", in: "u", out: "u") { call in
                                try await Task.sleep(for: .milliseconds(1))
                                return [.uint32(try call.argument(0, as: UInt32.self) + 2)]
                            },
                            DBusMethod("AskingTheBus", in: "u", out: "us") { [server] call in
                                let id = try await server.call(
                                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                    interface: "org.freedesktop.DBus", method: "GetId")
                                return [.uint32(try call.argument(0, as: UInt32.self) + 3), id[0]]
                            },
                            DBusMethod("Failing", in: "u", out: "") { _ in
                                throw DBusError(DBusError.Name(rawValue: "org.example.Error.Refused"), "no")
                            },
                        ])
                ], at: "/handlers")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let methods = ["AtOnce", "AfterSleeping", "AskingTheBus", "Failing"]
                        let method = methods[index % methods.count]
                        let call = {
                            try await client.call(
                                destination: server.uniqueName, path: "/handlers", interface: "org.example.Handlers",
                                method: method, arguments: [.uint32(UInt32(index))])
                        }
                        if method == "Failing" {
                            await #expect(throws: DBusError.self) { try await call() }
                            return
                        }
                        let reply = try await call()
                        #expect(try reply[0].decode(UInt32.self) == UInt32(index + 1 + index % methods.count))
                        if method == "AskingTheBus" { #expect(try reply[1].decode(String.self).count == 32) }
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test func everyConnectionAnswersPeerOnAnyPath() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            func peer(_ method: String) async throws -> [DBusValue] {
                try await client.call(
                    destination: server.uniqueName, path: "/nothing/here", interface: "org.freedesktop.DBus.Peer",
                    method: method)
            }
            #expect(try await peer("Ping") == [])
            let id = try #require(try await peer("GetMachineId").first).decode(String.self)
            #expect(id.count == 32 && id.allSatisfy(\.isHexDigit), "\(id)")
            if let recorded = try? String(contentsOfFile: "/etc/machine-id", encoding: .utf8) {
                #expect(id == recorded.prefix { $0 != "\n" })
            }
            let error = await #expect(throws: DBusError.self) { try await peer("Dance") }
            #expect(error?.name == .unknownMethod)
        }
    }
}
