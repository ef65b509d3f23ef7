import AbleDBus
import AbleTestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct SignalTests {
    static let rule = DBusMatchRule(interface: "org.example.Ticker", member: "Tick")

    @Test func aSubscriberReceivesMatchingSignalsInOrder() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let stream = try await receiver.signals(matching: Self.rule)
            for index in 0..<100 {
                try emitter.emitSignal(
                    path: "/ticker", interface: "org.example.Ticker", member: "Tick",
                    arguments: [.uint32(UInt32(index))])
            }
            // A signal of another member is not delivered.
            try emitter.emitSignal(
                path: "/ticker", interface: "org.example.Ticker", member: "Tock", arguments: [.uint32(999)])
            var received: [UInt32] = []
            for try await signal in stream {
                #expect(signal.sender == emitter.uniqueName)
                #expect(signal.path == "/ticker")
                received.append(try signal.arguments[0].decode(UInt32.self))
                if received.count == 100 { break }
            }
            #expect(received == Array(0..<100))
        }
    }

    @Test func rulesFilterByPathNamespaceSenderAndArguments() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let other = try await bus.connect()
            let rule = DBusMatchRule(
                sender: emitter.uniqueName, pathNamespace: "/org/bluez/hci0", interface: "org.example.Ticker",
                arguments: [0: "wanted"])
            let stream = try await receiver.signals(matching: rule)
            let sends: [(DBusConnection, DBusObjectPath, String)] = [
                (emitter, "/org/bluez/hci0/dev_1", "wanted"),  // delivered
                (emitter, "/org/bluez/hci01", "wanted"),  // outside the namespace
                (emitter, "/org/bluez/hci0", "unwanted"),  // wrong arg0
                (other, "/org/bluez/hci0", "wanted"),  // wrong sender
                (emitter, "/org/bluez/hci0", "wanted"),  // delivered
            ]
            for (connection, path, argument) in sends {
                try connection.emitSignal(
                    path: path, interface: "org.example.Ticker", member: "Tick", arguments: [.string(argument)])
            }
            try emitter.emitSignal(
                path: "/org/bluez/hci0", interface: "org.example.Ticker", member: "End", arguments: [.string("wanted")])
            var paths: [DBusObjectPath] = []
            for try await signal in stream {
                if signal.member == "End" { break }
                paths.append(signal.path)
            }
            #expect(paths == ["/org/bluez/hci0/dev_1", "/org/bluez/hci0"])
        }
    }

    @Test func aWellKnownSenderFollowsItsOwner() async throws {
        try await withPrivateBus { bus, receiver in
            let first = try await bus.connect()
            try await first.requestName("org.example.Service")
            let stream = try await receiver.signals(
                matching: DBusMatchRule(sender: "org.example.Service", interface: "org.example.Ticker"))
            try first.emitSignal(path: "/a", interface: "org.example.Ticker", member: "Tick", arguments: [.uint32(1)])
            await first.close()
            let second = try await bus.connect()
            try await second.requestName("org.example.Service")
            // Give the daemon's NameOwnerChanged time to arrive before the new owner speaks.
            _ = try await receiver.nameOwner(of: "org.example.Service")
            try second.emitSignal(path: "/a", interface: "org.example.Ticker", member: "Tick", arguments: [.uint32(2)])
            var values: [UInt32] = []
            for try await signal in stream {
                values.append(try signal.arguments[0].decode(UInt32.self))
                if values.count == 2 { break }
            }
            #expect(values == [1, 2])
        }
    }

    @Test func endingIterationRemovesTheMatchRuleFromTheDaemon() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let before = try await receiver.matchRuleCount()
            let task = Task {
                let stream = try await receiver.signals(matching: Self.rule)
                for try await _ in stream {}
            }
            try await waitUntil { try await receiver.matchRuleCount() == before + 1 }
            task.cancel()
            _ = await task.result
            try await waitUntil { try await receiver.matchRuleCount() == before }
            // And a signal sent now reaches nobody: a new stream sees only what comes after it.
            try emitter.emitSignal(path: "/t", interface: "org.example.Ticker", member: "Tick", arguments: [.uint32(1)])
            #expect(try await receiver.matchRuleCount() == before)
        }
    }

    @Test func cancellingTheTaskThatIteratesEndsTheStreamWithNilAndRemovesTheMatchRule() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let before = try await receiver.matchRuleCount()
            let stream = try await receiver.signals(matching: Self.rule)
            let tookFirst = Locked(false)
            let consumer = Task {
                var signals = stream.makeAsyncIterator()
                _ = try await signals.next()
                tookFirst.value = true
                let afterCancellation = try await signals.next()
                let later = try await signals.next()
                return (afterCancellation, later)
            }
            try emitter.emitSignal(path: "/t", interface: "org.example.Ticker", member: "Tick", arguments: [.uint32(1)])
            try await waitUntil { tookFirst.value }
            consumer.cancel()
            let (afterCancellation, later) = try await consumer.value
            #expect(afterCancellation == nil)
            #expect(later == nil)
            // The stream is still referenced: the cancellation alone removed the rule.
            try await waitUntil { try await receiver.matchRuleCount() == before }
            withExtendedLifetime(stream) {}
        }
    }

    @Test func discardingAStreamNeverIteratedRemovesItsMatchRule() async throws {
        try await withPrivateBus { _, receiver in
            let before = try await receiver.matchRuleCount()
            var stream: DBusSignalStream? = try await receiver.signals(matching: Self.rule)
            #expect(try await receiver.matchRuleCount() == before + 1)
            _ = stream
            stream = nil
            try await waitUntil { try await receiver.matchRuleCount() == before }
        }
    }

    @Test func aFullBufferDropsNewSignalsAndCountsThem() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let stream = try await receiver.signals(matching: Self.rule, bufferLimit: 10)
            for index in 0..<30 {
                try emitter.emitSignal(
                    path: "/t", interface: "org.example.Ticker", member: "Tick", arguments: [.uint32(UInt32(index))])
            }
            try emitter.emitSignal(
                path: "/t", interface: "org.example.Ticker", member: "Tick", arguments: [.uint32(99)])
            try await waitUntil { stream.droppedCount == 21 }
            var received: [UInt32] = []
            for try await signal in stream {
                received.append(try signal.arguments[0].decode(UInt32.self))
                if received.count == 10 { break }
            }
            #expect(received == Array(0..<10))
        }
    }

    @Test func nameOwnerChangesReportAcquiredAndLostNames() async throws {
        try await withPrivateBus { bus, watcher in
            let changes = try await watcher.nameOwnerChanges(of: "org.example.Watched")
            let owner = try await bus.connect()
            #expect(try await owner.requestName("org.example.Watched") == .primaryOwner)
            #expect(try await watcher.nameOwner(of: "org.example.Watched") == owner.uniqueName)
            try await owner.releaseName("org.example.Watched")
            var seen: [DBusConnection.NameOwnerChange] = []
            for try await change in changes {
                seen.append(change)
                if seen.count == 2 { break }
            }
            #expect(seen.map(\.newOwner) == [owner.uniqueName, nil])
            #expect(try await watcher.nameOwner(of: "org.example.Watched") == nil)
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct SignalHandlerTests {
    @Test func aHandlerSubscriptionDeliversInOrderUntilCancelled() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let received = Locked<[UInt32]>([])
            let ended = Locked(false)
            let before = try await receiver.matchRuleCount()
            let subscription = try await receiver.subscribe(
                matching: DBusMatchRule(interface: "org.example.Ticker"),
                handler: { signal in
                    if case .uint32(let value)? = signal.arguments.first { received.value.append(value) }
                }, onEnd: { _ in ended.value = true })
            for index in 0..<50 {
                try emitter.emitSignal(
                    path: "/t", interface: "org.example.Ticker", member: "Tick", arguments: [.uint32(UInt32(index))])
            }
            try await waitUntil { received.value.count == 50 }
            #expect(received.value == Array(0..<50))
            subscription.cancel()
            #expect(ended.value)
            try await waitUntil { try await receiver.matchRuleCount() == before }
            try emitter.emitSignal(
                path: "/t", interface: "org.example.Ticker", member: "Tick", arguments: [.uint32(99)])
            _ = try await emitter.nameOwner(of: "org.freedesktop.DBus")
            _ = try await receiver.nameOwner(of: "org.freedesktop.DBus")
            #expect(received.value.count == 50)
        }
    }

    @Test func aHandlerSubscriptionEndsWithAnErrorWhenTheBusDies() async throws {
        let bus = try PrivateBus()
        let receiver = try await bus.connect()
        let ended = Locked<String?>(nil)
        let subscription = try await receiver.subscribe(
            matching: DBusMatchRule(interface: "org.example.Ticker"), handler: { _ in },
            onEnd: { error in ended.value = (error as? DBusError)?.name.rawValue ?? "no error" })
        bus.kill()
        try await waitUntil { ended.value != nil }
        #expect(ended.value == DBusError.Name.disconnected.rawValue)
        subscription.cancel()
    }
}
