import AbleDBus
import AbleTestSupport
import Foundation
import Testing

/// The private bus keeps dbus-daemon's default limits, as Debian's system bus does: 128 calls
/// awaiting replies and 512 match rules per connection.
@Suite(.timeLimit(.minutes(1)))
struct BusLimitsTests {
    /// An object whose `Hold` calls wait until the gate opens, counting how many wait at once.
    final class Gate: Sendable {
        static let path: DBusObjectPath = "/org/example/gate"
        let open = Locked(false)
        let holding = Locked(0)
        let mostHeld = Locked(0)
        let served = Locked<[UInt32]>([])

        func export(on server: DBusConnection) async throws {
            try await server.export(
                [
                    DBusInterface(
                        "org.example.Gate",
                        methods: [
                            DBusMethod("Hold", in: "u", out: "u") { [self] call in
                                let number = try call.argument(0, as: UInt32.self)
                                served.withLock { $0.append(number) }
                                let held = holding.withLock {
                                    $0 += 1
                                    return $0
                                }
                                mostHeld.withLock { $0 = max($0, held) }
                                while !open.value { try await Task.sleep(for: .milliseconds(5)) }
                                holding.withLock { $0 -= 1 }
                                return [.uint32(number)]
                            }
                        ])
                ], at: Self.path)
        }

        func hold(_ number: UInt32, from client: DBusConnection, on server: DBusConnection, timeout: Duration? = nil)
            async throws -> UInt32
        {
            let reply = try await client.call(
                destination: server.uniqueName, path: Self.path, interface: "org.example.Gate", method: "Hold",
                arguments: [.uint32(number)], timeout: timeout ?? .safetyNet)
            return try reply[0].decode(UInt32.self)
        }
    }

    @Test func callsBeyondTheReplyLimitWaitTheirTurnAndAllSucceed() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            let gate = Gate()
            try await gate.export(on: server)
            #expect(await client.maximumOutstandingCalls == 100)
            try await withThrowingTaskGroup(of: (UInt32, UInt32).self) { group in
                for number in 0..<UInt32(300) {
                    group.addTask { (number, try await gate.hold(number, from: client, on: server)) }
                }
                try await waitUntil { gate.holding.value == 100 }
                try await waitUntil { await client.callCounts == (outstanding: 100, waiting: 200) }
                // The daemon refuses the 129th call awaiting a reply; none went out beyond the 100th.
                #expect(gate.holding.value == 100)
                gate.open.value = true
                var answered = 0
                for try await (number, answer) in group {
                    #expect(answer == number)
                    answered += 1
                }
                #expect(answered == 300)
            }
            #expect(gate.mostHeld.value == 100)
            #expect(await client.callCounts == (outstanding: 0, waiting: 0))
            #expect(await client.resourceCounts.pendingCalls == 0)
        }
    }

    @Test func waitingCallsGoOutInTheOrderTheyWereMade() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            await client.setMaximumOutstandingCalls(1)
            let gate = Gate()
            try await gate.export(on: server)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for number in 0..<UInt32(5) {
                    group.addTask { _ = try await gate.hold(number, from: client, on: server) }
                    try await waitUntil { await client.resourceCounts.pendingCalls == Int(number) + 1 }
                }
                gate.open.value = true
                try await group.waitForAll()
            }
            #expect(gate.served.value == [0, 1, 2, 3, 4])
            #expect(gate.mostHeld.value == 1)
        }
    }

    @Test func aWaitingCallTimesOutWithNoReplyWithoutBeingSent() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            await client.setMaximumOutstandingCalls(1)
            let gate = Gate()
            try await gate.export(on: server)
            let first = Task { try await gate.hold(1, from: client, on: server) }
            try await waitUntil { gate.holding.value == 1 }
            let error = await #expect(throws: DBusError.self) {
                try await gate.hold(2, from: client, on: server, timeout: .milliseconds(200))
            }
            #expect(error?.name == .noReply)
            #expect(await client.callCounts == (outstanding: 1, waiting: 0))
            gate.open.value = true
            #expect(try await first.value == 1)
            #expect(gate.served.value == [1])
        }
    }

    @Test func aCancelledWaitingCallLeavesTheLineAtOnce() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            await client.setMaximumOutstandingCalls(1)
            let gate = Gate()
            try await gate.export(on: server)
            let first = Task { try await gate.hold(1, from: client, on: server) }
            try await waitUntil { gate.holding.value == 1 }
            let second = Task { try await gate.hold(2, from: client, on: server) }
            try await waitUntil { await client.callCounts.waiting == 1 }
            second.cancel()
            await #expect(throws: CancellationError.self) { try await second.value }
            try await waitUntil { await client.callCounts.waiting == 0 }
            let third = Task { try await gate.hold(3, from: client, on: server) }
            try await waitUntil { await client.callCounts.waiting == 1 }
            gate.open.value = true
            #expect(try await first.value == 1)
            #expect(try await third.value == 3)
            #expect(gate.served.value == [1, 3])
        }
    }

    @Test func callsToTheBusDaemonDoNotWaitBehindCallsToPeers() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            await client.setMaximumOutstandingCalls(1)
            let gate = Gate()
            try await gate.export(on: server)
            let first = Task { try await gate.hold(1, from: client, on: server) }
            try await waitUntil { gate.holding.value == 1 }
            #expect(try await client.nameOwner(of: "org.freedesktop.DBus") == "org.freedesktop.DBus")
            gate.open.value = true
            _ = try await first.value
        }
    }

    @Test func sixHundredSubscriptionsWithOneRuleShareOneRuleInTheDaemon() async throws {
        try await withPrivateBus { bus, client in
            let emitter = try await bus.connect()
            let before = try await client.matchRuleCount()
            let rule = DBusMatchRule(sender: emitter.uniqueName, interface: "org.example.Tick", member: "Tick")
            let streams = try await withThrowingTaskGroup(of: DBusSignalStream.self) { group in
                for _ in 0..<600 { group.addTask { try await client.signals(matching: rule) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(streams.count == 600)
            #expect(try await client.matchRuleCount() == before + 1)
            #expect(await client.installedMatchRules == 1)
            try emitter.emitSignal(path: "/", interface: "org.example.Tick", member: "Tick", arguments: [.uint32(7)])
            for stream in streams {
                var signals = stream.makeAsyncIterator()
                #expect(try await signals.next()?.arguments == [.uint32(7)])
            }
            let subscription = try await client.subscribe(matching: rule, handler: { _ in })
            #expect(await client.installedMatchRules == 1)
            subscription.cancel()
            #expect(await client.installedMatchRules == 1)
        }
    }

    @Test func theRuleLeavesTheDaemonWithItsLastSubscriber() async throws {
        try await withPrivateBus { bus, client in
            let before = try await client.matchRuleCount()
            let rule = DBusMatchRule(interface: "org.example.Tick", member: "Tick")
            let first = try await client.subscribe(matching: rule, handler: { _ in })
            let second = try await client.subscribe(matching: rule, handler: { _ in })
            #expect(try await client.matchRuleCount() == before + 1)
            first.cancel()
            try await waitUntil { await client.resourceCounts.subscribers == 1 }
            #expect(try await client.matchRuleCount() == before + 1)
            second.cancel()
            try await waitUntil { try await client.matchRuleCount() == before }
            #expect(await client.installedMatchRules == 0)
            // And a new subscriber installs it again.
            let third = try await client.subscribe(matching: rule, handler: { _ in })
            #expect(try await client.matchRuleCount() == before + 1)
            third.cancel()
        }
    }
}
