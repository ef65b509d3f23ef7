import AbleTestSupport
import Testing

@testable import AbleDBus

/// A flood of signals makes a connection read its socket on a timer instead of on every
/// readiness event (`ReadCoalescing`); nothing may be lost, reordered or held back by it.
@Suite(.timeLimit(.minutes(1)))
struct ReadCoalescingTests {
    static let rule = DBusMatchRule(interface: "org.example.Flood", member: "Tick")

    static func tick(_ index: UInt32, from emitter: DBusConnection) throws {
        try emitter.emitSignal(
            path: "/flood", interface: "org.example.Flood", member: "Tick", arguments: [.uint32(index)])
    }

    /// Emits ticks 0, 1, 2, … until `stop` is set; returns how many it sent. Given how many
    /// arrived, it keeps at most a few thousand signals ahead, so that a call's answer, which
    /// comes after them on the receiver's socket, is not held up by a backlog.
    ///
    /// It starts with a burst of 2,000 (fewer than that ahead when `received` is given), so that
    /// the receiver's read events come back to back however slowly this process emits: under
    /// ThreadSanitizer a steady trickle leaves more than a coalescing interval between them.
    static func flood(
        from emitter: DBusConnection, until stop: Locked<Bool>, aheadOf received: Locked<UInt32>? = nil
    ) async throws -> UInt32 {
        var sent: UInt32 = 0
        while sent < 2_000 {
            try tick(sent, from: emitter)
            sent += 1
        }
        while !stop.value {
            for _ in 0..<200 {
                try tick(sent, from: emitter)
                sent += 1
            }
            while let received, sent &- received.value > 2_000 {
                try await Task.sleep(for: .milliseconds(1))
            }
            await Task.yield()
        }
        return sent
    }

    /// Takes signals from `stream` until `count` arrived, checking that they are 0, 1, 2, … in order.
    static func receive(_ count: Int, from iterator: inout DBusSignalStream.AsyncIterator, startingAt first: Int = 0)
        async throws
    {
        for expected in first..<(first + count) {
            let signal = try #require(try await iterator.next())
            #expect(try signal.arguments[0].decode(UInt32.self) == UInt32(expected))
        }
    }

    @Test func aFloodIsReadOnTicksThenReadinessTakesOverAgain() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let stream = try await receiver.signals(matching: Self.rule, bufferLimit: 1 << 16)
            var iterator = stream.makeAsyncIterator()
            // Far more than one 2 KiB read: the next read event follows at once, with signals only.
            let flood = 20_000
            for index in 0..<flood { try Self.tick(UInt32(index), from: emitter) }
            try await Self.receive(flood, from: &iterator)
            #expect(await receiver.readCoalescing.ticks > 0, "the flood was never read on ticks")
            // A tick that finds the socket empty ends it, and a lone signal is read on readiness.
            try await waitUntil { await !receiver.readCoalescing.isActive }
            let ticks = await receiver.readCoalescing.ticks
            try Self.tick(UInt32(flood), from: emitter)
            try await Self.receive(1, from: &iterator, startingAt: flood)
            #expect(await receiver.readCoalescing.ticks == ticks)
        }
    }

    @Test func callsBothWaysAreAnsweredDuringAFlood() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let caller = try await bus.connect()
            let echo = DBusInterface(
                "org.example.Echo",
                methods: [DBusMethod.immediate("Echo", in: "s", out: "s") { call in call.arguments }])
            try await caller.export([echo], at: "/echo")
            try await receiver.export([echo], at: "/echo")
            let stream = try await receiver.signals(matching: Self.rule, bufferLimit: 1 << 20)
            let stop = Locked(false)
            let received = Locked<UInt32>(0)
            let flooding = Task { try await Self.flood(from: emitter, until: stop, aheadOf: received) }
            let receiving = Task {
                var count: UInt32 = 0
                for try await signal in stream {
                    let index = try signal.arguments[0].decode(UInt32.self)
                    if index == .max { break }
                    guard index == count else { return (count, false) }
                    count += 1
                    received.value = count
                }
                return (count, true)
            }
            try await waitUntil { await receiver.readCoalescing.isActive }
            for index in 0..<20 {
                // The coalescing connection's own call: its reply must come through.
                let out = try await receiver.call(
                    destination: caller.uniqueName, path: "/echo", interface: "org.example.Echo", method: "Echo",
                    arguments: [.string("out \(index)")])
                #expect(out == [.string("out \(index)")])
                // A call to it, which ends the coalescing that delayed it.
                let back = try await caller.call(
                    destination: receiver.uniqueName, path: "/echo", interface: "org.example.Echo", method: "Echo",
                    arguments: [.string("in \(index)")])
                #expect(back == [.string("in \(index)")])
            }
            stop.value = true
            let sent = try await flooding.value
            try Self.tick(.max, from: emitter)
            let (count, inOrder) = try await receiving.value
            #expect(inOrder, "signal \(count) came out of order")
            #expect(count == sent)
            #expect(await receiver.readCoalescing.ticks > 0)
        }
    }

    @Test func closingWhileCoalescingEndsTheStreams() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let stream = try await receiver.signals(matching: Self.rule, bufferLimit: 1 << 20)
            let stop = Locked(false)
            let flooding = Task { try await Self.flood(from: emitter, until: stop) }
            // Coalescing starts and stops with the flood's pace, which a loaded machine breaks up:
            // the poll may miss its spells for a while, never for good while the flood goes on.
            try await waitUntil(timeout: .seconds(30)) { await receiver.readCoalescing.isActive }
            await receiver.close()
            stop.value = true
            _ = try await flooding.value
            await #expect(throws: DBusError.self) {
                for try await _ in stream {}
            }
            #expect(await receiver.readCoalescing.isActive == false)
        }
    }

    @Test func coalescingStartsOnlyForCloseEventsOfSignalsAndEndsOnAnythingElse() {
        let interval = ReadCoalescing.intervalNanoseconds
        var coalescing = ReadCoalescing()
        var decisions: [Bool] = []
        // The first event has nothing to be close to.
        decisions.append(coalescing.noteReadEvent(at: 1_000, signalsOnly: true))
        // Close, but not only signals (or a call awaits its reply).
        decisions.append(coalescing.noteReadEvent(at: 1_000 + interval / 2, signalsOnly: false))
        // Only signals, but an interval after the last event.
        decisions.append(coalescing.noteReadEvent(at: 1_000 + interval * 2, signalsOnly: true))
        #expect(decisions == [false, false, false])
        #expect(!coalescing.isActive)
        // Only signals, close to the last: starts, and does not start twice.
        decisions = [
            coalescing.noteReadEvent(at: 1_000 + interval * 2 + 10, signalsOnly: true),
            coalescing.noteReadEvent(at: 1_000 + interval * 2 + 20, signalsOnly: true),
        ]
        #expect(decisions == [true, false])
        #expect(coalescing.isActive)
        // Ticks go on while they read signals only; a tick that reads nothing ends it, and a tick
        // after the end does nothing.
        decisions = [
            coalescing.noteTick(read: true, signalsOnly: true),
            coalescing.noteTick(read: false, signalsOnly: true),
            coalescing.noteTick(read: true, signalsOnly: true),
        ]
        #expect(decisions == [true, false, false])
        #expect(coalescing.ticks == 1)
        #expect(!coalescing.isActive)
        // A tick that reads anything but signals ends it too, and so does stop().
        decisions = [
            coalescing.noteReadEvent(at: 1_000 + interval * 3, signalsOnly: true),
            coalescing.noteTick(read: true, signalsOnly: false),
            coalescing.noteReadEvent(at: 1_000 + interval * 3 + 10, signalsOnly: true),
            coalescing.stop(),
            coalescing.stop(),
        ]
        #expect(decisions == [true, false, true, true, false])
        #expect(coalescing.ticks == 2)
    }
}
