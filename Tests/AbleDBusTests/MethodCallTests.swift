import AbleDBus
import AbleTestSupport
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1)))
struct MethodCallTests {
    @Test func aCallToTheBusDaemonReturnsItsReply() async throws {
        try await withPrivateBus { _, connection in
            let reply = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                method: "GetId")
            let id = try #require(reply.first).decode(String.self)
            #expect(id.count == 32)
            #expect(connection.uniqueName.hasPrefix(":"))
        }
    }

    @Test(arguments: ["Echo", "EchoNow"])
    func anExportedMethodAnswersAnotherConnection(method: String) async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let reply = try await EchoService.call(client, on: server, method, [.variant(.string("hi"))])
            #expect(reply == [.variant(.string("hi"))])
        }
    }

    @Test func theHandlerSeesTheCallersUniqueName() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let reply = try await EchoService.call(client, on: server, "Sender")
            #expect(reply == [.string(client.uniqueName)])
        }
    }

    @Test func anErrorReplyCarriesItsNameAndMessage() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let error = await #expect(throws: DBusError.self) {
                try await EchoService.call(
                    client, on: server, "Fail",
                    [.string("org.bluez.Error.Failed"), .string("le-connection-abort-by-local")])
            }
            #expect(error?.name.rawValue == "org.bluez.Error.Failed")
            #expect(error?.message == "le-connection-abort-by-local")
        }
    }

    @Test func aCallThatGetsNoReplyInTimeThrowsNoReply() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let clock = ContinuousClock()
            let start = clock.now
            let error = await #expect(throws: DBusError.self) {
                try await EchoService.call(client, on: server, "Sleep", [.uint32(20_000)], timeout: .milliseconds(200))
            }
            #expect(error?.isTimeout == true)
            // Long before the reply: a margin that a loaded machine (or a sanitizer) cannot eat.
            #expect(clock.now - start < .seconds(10))
            // The connection is still fine afterwards.
            #expect(
                try await EchoService.call(client, on: server, "Echo", [.variant(.byte(1))]) == [.variant(.byte(1))])
        }
    }

    @Test func aTimedOutCallIsForgottenAndNamesItsTimeout() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            // The reply comes 3 s late. A loop that wakes late handles what it read before the
            // timers that fell due meanwhile, and under ThreadSanitizer on a loaded machine it
            // once woke a second late: a reply 1 s late then answered the call.
            let error = await #expect(throws: DBusError.self) {
                try await EchoService.call(client, on: server, "Sleep", [.uint32(3_000)], timeout: .milliseconds(100))
            }
            #expect(error?.name == .noReply)
            #expect(error?.message == "no reply came within 100 ms")
            #expect(await client.resourceCounts.pendingCalls == 0)
            // The late reply answers nothing and is dropped.
            try await Task.sleep(for: .milliseconds(3_500))
            #expect(
                try await EchoService.call(client, on: server, "Echo", [.variant(.byte(2))]) == [.variant(.byte(2))])
            #expect(await client.resourceCounts.pendingCalls == 0)
        }
    }

    /// A call made before the one whose timeout is tested: its deadline is the timer's first.
    enum EarlierCall: CaseIterable, Sendable {
        /// Still waiting, with a later deadline (60 s): the timer must be brought forward.
        case waitingLonger
        /// Cancelled once sent, with an earlier deadline (300 ms), which comes and finds no call:
        /// the timer must be armed again for the next.
        case goneBeforeItsDeadline
    }

    @Test(arguments: EarlierCall.allCases)
    func aTimeoutFiresOnTimeWhateverDeadlineCameBefore(_ earlier: EarlierCall) async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let earlierTimeout: Duration = earlier == .waitingLonger ? .seconds(60) : .milliseconds(300)
            let earlierCall = Task {
                try await EchoService.call(client, on: server, "Sleep", [.uint32(20_000)], timeout: earlierTimeout)
            }
            try await waitUntil { await client.resourceCounts.pendingCalls == 1 }
            if earlier == .goneBeforeItsDeadline {
                earlierCall.cancel()
                await #expect(throws: CancellationError.self) { try await earlierCall.value }
            }
            let clock = ContinuousClock()
            let start = clock.now
            let error = await #expect(throws: DBusError.self) {
                try await EchoService.call(client, on: server, "Sleep", [.uint32(20_000)], timeout: .seconds(1))
            }
            #expect(error?.isTimeout == true)
            // Long before the reply: a margin that a loaded machine (or a sanitizer) cannot eat.
            #expect(clock.now - start < .seconds(10))
            earlierCall.cancel()
            _ = await earlierCall.result
        }
    }

    @Test func aCancelledCallThrowsCancellationErrorAtOnce() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let task = Task { try await EchoService.call(client, on: server, "Sleep", [.uint32(20_000)]) }
            try await Task.sleep(for: .milliseconds(100))
            let clock = ContinuousClock()
            let start = clock.now
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            // Long before the reply: a margin that a loaded machine (or a sanitizer) cannot eat.
            #expect(clock.now - start < .seconds(10))
            // The late reply is dropped and later calls work.
            #expect(
                try await EchoService.call(client, on: server, "Echo", [.variant(.uint16(7))]) == [.variant(.uint16(7))]
            )
        }
    }

    @Test func aCallFromAnAlreadyCancelledTaskNeverLeaves() async throws {
        try await withPrivateBus { bus, server in
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await EchoService.call(server, on: server, "Echo", [.variant(.byte(1))])
            }
            await #expect(throws: CancellationError.self) { try await task.value }
        }
    }

    @Test func tenThousandConcurrentCallsAllGetTheirOwnReply() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let count = 10_000
            let sum = try await withThrowingTaskGroup(of: UInt64.self) { group in
                for index in 0..<count {
                    group.addTask {
                        let reply = try await EchoService.call(
                            client, on: server, "EchoNow", [.variant(.uint64(UInt64(index)))])
                        let value = try #require(reply.first?.unwrappingVariant).decode(UInt64.self)
                        #expect(value == UInt64(index))
                        return value
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(sum == UInt64(count * (count - 1) / 2))
        }
    }

    @Test func unknownObjectsMethodsAndInterfacesGetTheStandardErrors() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let cases: [(DBusObjectPath, String, String, DBusError.Name)] = [
                ("/nothing/here", EchoService.interface, "Echo", .unknownObject),
                (EchoService.path, EchoService.interface, "NoSuchMethod", .unknownMethod),
                (EchoService.path, "org.example.Missing", "Echo", .unknownInterface),
            ]
            for (path, interface, method, expected) in cases {
                let error = await #expect(throws: DBusError.self) {
                    try await client.call(
                        destination: server.uniqueName, path: path, interface: interface, method: method,
                        arguments: [.variant(.byte(0))])
                }
                #expect(error?.name == expected)
            }
        }
    }

    @Test func argumentsOfTheWrongSignatureNeverReachTheHandler() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let error = await #expect(throws: DBusError.self) {
                try await EchoService.call(client, on: server, "Sleep", [.string("soon")])
            }
            #expect(error?.name == .invalidArgs)
        }
    }

    @Test func aHandlerReturningTheWrongTypeRepliesWithAnErrorInsteadOfGarbage() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let error = await #expect(throws: DBusError.self) {
                try await EchoService.call(client, on: server, "Wrong")
            }
            #expect(error?.name == .failed)
        }
    }

    @Test func argumentsLibdbusWouldRejectThrowBeforeAnythingIsSent() async throws {
        try await withPrivateBus { _, connection in
            let invalid: [DBusValue] = [
                .array(.string, [.uint32(1)]),
                .string("nul\u{0}inside"),
                .dictionary(key: "v", value: .string, []),
                .structure([]),
            ]
            for value in invalid {
                await #expect(throws: DBusError.self) {
                    try await EchoService.call(connection, on: connection, "Echo", [.variant(value)])
                }
            }
        }
    }

    @Test func callsFromAnActorSharingTheConnectionsExecutorWork() async throws {
        actor Caller {
            let connection: DBusConnection
            nonisolated var unownedExecutor: UnownedSerialExecutor { connection.executor.asUnownedSerialExecutor() }
            init(_ connection: DBusConnection) { self.connection = connection }
            func run(_ count: Int) async throws -> Int {
                var total = 0
                for index in 0..<count {
                    let reply = try await connection.call(
                        destination: connection.uniqueName, path: EchoService.path, interface: EchoService.interface,
                        method: "EchoNow", arguments: [.variant(.int32(Int32(index)))])
                    total += Int(try reply[0].unwrappingVariant.decode(Int32.self))
                }
                return total
            }
        }
        try await withPrivateBus { _, connection in
            try await connection.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            #expect(try await Caller(connection).run(100) == 4950)
        }
    }
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct WellKnownBusTests {
    @Test(arguments: ["DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS"])
    func theSessionAndSystemBusesAreFoundThroughTheirEnvironmentVariables(variable: String) async throws {
        let bus = try PrivateBus()
        await (try bus.connect()).close()  // the daemon is listening
        let previous = ProcessInfo.processInfo.environment[variable]
        setenv(variable, bus.address, 1)
        defer {
            if let previous { setenv(variable, previous, 1) } else { unsetenv(variable) }
        }
        let connection = try await DBusConnection.connect(
            to: variable == "DBUS_SESSION_BUS_ADDRESS" ? .session : .system, log: { _ in })
        let id = try await connection.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            method: "GetId")
        #expect(try id[0].decode(String.self).count == 32)
        await connection.close()
    }

    @Test func severalConnectionsLiveSideBySide() async throws {
        let bus = try PrivateBus()
        var connections: [DBusConnection] = []
        for _ in 0..<8 { connections.append(try await bus.connect()) }
        #expect(Set(connections.map(\.uniqueName)).count == 8)
        for connection in connections { await connection.close() }
    }
}
