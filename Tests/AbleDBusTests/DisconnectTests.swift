import AbleDBus
import AbleTestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct DisconnectTests {
    @Test func killingTheDaemonFailsACallInFlightPromptly() async throws {
        let bus = try PrivateBus()
        let server = try await bus.connect()
        let client = try await bus.connect()
        try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
        let call = Task { try await EchoService.call(client, on: server, "Sleep", [.uint32(20_000)]) }
        try await Task.sleep(for: .milliseconds(100))
        let clock = ContinuousClock()
        let start = clock.now
        bus.kill()
        let error = await #expect(throws: DBusError.self) { try await call.value }
        #expect(error?.isDisconnected == true)
        // Long before the reply: a margin that a loaded machine (or a sanitizer) cannot eat.
        #expect(clock.now - start < .seconds(10))
        // Later calls fail at once too.
        let later = await #expect(throws: DBusError.self) { try await EchoService.call(client, on: server, "Echo") }
        #expect(later?.isDisconnected == true)
        #expect(await client.isConnected == false)
    }

    @Test func killingTheDaemonEndsEveryStreamWithAnError() async throws {
        let bus = try PrivateBus()
        let connection = try await bus.connect()
        let signals = try await connection.signals(matching: DBusMatchRule(interface: "org.example.Ticker"))
        let owners = try await connection.nameOwnerChanges(of: "org.example.Nobody")
        let signalTask = Task { for try await _ in signals {} }
        let ownerTask = Task { for try await _ in owners {} }
        try await Task.sleep(for: .milliseconds(50))
        bus.kill()
        for result in [await signalTask.result, await ownerTask.result] {
            #expect(throws: DBusError.self) { try result.get() }
        }
    }

    @Test func closingTheConnectionFailsPendingCallsAndStreams() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await server.export([EchoService.interfaceDeclaration()], at: EchoService.path)
            let stream = try await client.signals(matching: DBusMatchRule(interface: "org.example.Ticker"))
            let streamTask = Task { for try await _ in stream {} }
            let call = Task { try await EchoService.call(client, on: server, "Sleep", [.uint32(20_000)]) }
            try await Task.sleep(for: .milliseconds(100))
            await client.close()
            await #expect(throws: DBusError.self) { try await call.value }
            await #expect(throws: DBusError.self) { try await streamTask.value }
            await #expect(throws: DBusError.self) { try await client.signals(matching: DBusMatchRule()) }
        }
    }

    @Test func connectingToANonexistentBusThrows() async throws {
        let error = await #expect(throws: DBusError.self) {
            try await DBusConnection.connect(to: .address("unix:path=/nonexistent/able/bus"))
        }
        #expect(error?.message.isEmpty == false)
    }
}
