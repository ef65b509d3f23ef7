import AbleDBus
import AbleTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.timeLimit(.minutes(1)))
struct EventLoopTests {
    static func uniqueName() -> String {
        "able.t.\(UInt32.random(in: 0..<0xFF_FFFF))"
    }

    @Test func aLoopHasOneThreadForAllItsConnectionsThatEndsWithTheLast() async throws {
        let name = Self.uniqueName()
        let loop = DBusExecutor(threadName: name)
        #expect(ThreadCensus.threads(named: name) == 0)
        let bus = try PrivateBus()
        let server = try await bus.connect(executor: loop)
        let client = try await bus.connect(executor: loop)
        try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
        let reply = try await EchoService.call(client, on: server, "Echo", [.variant(.string("hi"))])
        #expect(reply == [.variant(.string("hi"))])
        #expect(ThreadCensus.threads(named: name) == 1)
        await server.close()
        #expect(ThreadCensus.threads(named: name) == 1, "the client still runs on the loop")
        await client.close()
        try await waitUntil { ThreadCensus.threads(named: name) == 0 }
        // A connection afterwards starts it again.
        let again = try await bus.connect(executor: loop)
        _ = try await again.nameOwner(of: "org.freedesktop.DBus")
        #expect(ThreadCensus.threads(named: name) == 1)
        await again.close()
        try await waitUntil { ThreadCensus.threads(named: name) == 0 }
    }

    @Test func closingTheLastConnectionWithWorkPendingResumesEverythingWithAnError() async throws {
        let name = Self.uniqueName()
        let loop = DBusExecutor(threadName: name)
        let bus = try PrivateBus()
        let server = try await bus.connect()
        try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
        let client = try await bus.connect(executor: loop)
        let stream = try await client.signals(matching: DBusMatchRule(interface: "org.example.Ticker"))
        let streamTask = Task { for try await _ in stream {} }
        let calls = (0..<20).map { _ in
            Task { try await EchoService.call(client, on: server, "Sleep", [.uint32(20_000)]) }
        }
        try await Task.sleep(for: .milliseconds(100))
        await client.close()
        for call in calls {
            let error = await #expect(throws: DBusError.self) { try await call.value }
            #expect(error?.isDisconnected == true)
        }
        await #expect(throws: DBusError.self) { try await streamTask.value }
        try await waitUntil { ThreadCensus.threads(named: name) == 0 }
        await server.close()
    }

    @Test func killingTheDaemonEndsTheLoopsThread() async throws {
        let name = Self.uniqueName()
        let loop = DBusExecutor(threadName: name)
        let bus = try PrivateBus()
        let client = try await bus.connect(executor: loop)
        let stream = try await client.signals(matching: DBusMatchRule(interface: "org.example.Ticker"))
        let streamTask = Task { for try await _ in stream {} }
        #expect(ThreadCensus.threads(named: name) == 1)
        bus.kill()
        await #expect(throws: DBusError.self) { try await streamTask.value }
        try await waitUntil { ThreadCensus.threads(named: name) == 0 }
    }

    actor Caller {
        let connection: DBusConnection
        let server: DBusConnection
        nonisolated var unownedExecutor: UnownedSerialExecutor { connection.executor.asUnownedSerialExecutor() }

        init(connection: DBusConnection, server: DBusConnection) {
            self.connection = connection
            self.server = server
        }

        /// Whether each of `count` calls resumed on the loop's thread it was made from.
        func callsStayOnTheLoop(_ count: Int) async throws -> Bool {
            for index in 0..<count {
                let before = pthread_self()
                guard connection.executor.isOnLoop else { return false }
                _ = try await EchoService.call(connection, on: server, "Echo", [.variant(.uint32(UInt32(index)))])
                guard pthread_equal(before, pthread_self()) != 0, connection.executor.isOnLoop else { return false }
            }
            return true
        }
    }

    @Test func callsFromATaskOnTheLoopResumeOnTheLoopsThread() async throws {
        try await withPrivateBus { bus, server in
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let client = try await bus.connect()
            #expect(try await Caller(connection: client, server: server).callsStayOnTheLoop(100))
            await client.close()
        }
    }

    @Test func exportedHandlersAndSignalHandlersRunOnTheLoop() async throws {
        try await withPrivateBus { bus, server in
            let executor = server.executor
            let handlerOnLoop = Locked<Bool?>(nil)
            try await server.export(
                [
                    DBusInterface(
                        "org.example.Where",
                        methods: [
                            DBusMethod("Here", in: "", out: "b") { _ in
                                let onLoop = executor.isOnLoop
                                handlerOnLoop.value = onLoop
                                return [.boolean(onLoop)]
                            }
                        ])
                ], at: "/org/example/where")
            let client = try await bus.connect()
            let signalOnLoop = Locked<[Bool]>([])
            let subscription = try await client.subscribe(matching: DBusMatchRule(interface: "org.example.Ticker")) {
                (_: DBusSignal) in
                let onLoop = client.executor.isOnLoop
                signalOnLoop.value.append(onLoop)
            }
            let reply = try await client.call(
                destination: server.uniqueName, path: "/org/example/where", interface: "org.example.Where",
                method: "Here")
            #expect(reply == [.boolean(true)])
            #expect(handlerOnLoop.value == true)
            try server.emitSignal(path: "/org/example/ticker", interface: "org.example.Ticker", member: "Tick")
            try await waitUntil { !signalOnLoop.value.isEmpty }
            #expect(signalOnLoop.value == [true])
            subscription.cancel()
            await client.close()
        }
    }

    @Test func connectionsGivenTheirOwnLoopRunOnThreadsOfTheirOwn() async throws {
        let names = [Self.uniqueName(), Self.uniqueName()]
        let bus = try PrivateBus()
        var connections: [DBusConnection] = []
        for name in names {
            connections.append(
                try await bus.connect(executor: DBusExecutor(threadName: name)))
        }
        for (connection, name) in zip(connections, names) {
            _ = try await connection.nameOwner(of: "org.freedesktop.DBus")
            #expect(ThreadCensus.threads(named: name) == 1)
        }
        #expect(connections[0].executor !== connections[1].executor)
        for connection in connections { await connection.close() }
        for name in names { try await waitUntil { ThreadCensus.threads(named: name) == 0 } }
    }

    @Test func connectionsShareOneLoopByDefault() async throws {
        try await withPrivateBus { bus, first in
            let second = try await bus.connect()
            #expect(first.executor === DBusExecutor.shared)
            #expect(second.executor === DBusExecutor.shared)
            await second.close()
        }
    }
}
