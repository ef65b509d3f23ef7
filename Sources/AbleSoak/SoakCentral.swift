import Able
import AbleCommand
import AbleIO

/// The central side of `able-soak`: keeps the server connected with a ``MaintainedConnection``
/// and works it without pause for the soak's duration, while a scan runs beside it.
///
/// On each link it opens an L2CAP channel to the server's ``SoakServer/psm``, then loops: writes
/// the next number to the server's value and reads it back, sends it through the channel and
/// waits for the echo. A subscription to the server's counter runs through the maintained
/// connection across every reconnection. Numbers make losses visible: on a link that survives,
/// the counter's values go up by exactly one, a read returns what was just written and each echo
/// is the packet just sent. Whatever fails is counted by kind and error code, and the work goes
/// on with the next link.
struct SoakCentral: Sendable {
    let adapter: Adapter
    let serverAddress: BluetoothAddress
    let console: Console
    let ledger = SoakLedger()

    /// How the connection is kept: short waits, never giving up (the soak decides when to stop).
    static let policy = ReconnectPolicy(
        connectTimeout: .seconds(20), initialDelay: .seconds(1), maximumDelay: .seconds(5), maximumAttempts: nil)
    /// The longest one operation may take before it counts as failed with a timeout.
    static let operationTimeout = Duration.seconds(15)

    /// Works the connection for `duration`, then stops everything; returns the samples taken.
    func run(for duration: Duration) async -> SoakSamples {
        // Able's sockets loop keeps its `epoll` and `eventfd` descriptors for the process's life,
        // as the D-Bus loop does: open them before the baseline, which counts what must come back.
        _ = EventLoop.sockets
        let baseline = ProcessSample.now()
        say("baseline: \(baseline)")
        let connection = Lock(adapter.maintainConnection(to: serverAddress, policy: Self.policy))
        let tasks = [
            Task.inheritingExecutor { await watch(connection) },
            Task.inheritingExecutor { await consumeNotifications(connection) },
            Task.inheritingExecutor { await scan() },
            Task.inheritingExecutor { await work(connection) },
        ]
        var samples = SoakSamples(baseline: baseline)
        try? await adapter.sleep(for: duration / 4)
        samples.quarter = ProcessSample.now()
        say("a quarter of the way (after \(duration / 4)): \(samples.quarter!)")
        try? await adapter.sleep(for: duration / 4)
        samples.middle = ProcessSample.now()
        say("middle (after \(duration / 2)): \(samples.middle!)")
        try? await adapter.sleep(for: duration / 2)
        ledger.finish(at: .now)
        say("time is up: stopping")
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        await connection.withLock { $0 }.stop()
        // Let the kernel and the bus finish closing what was closed.
        try? await adapter.sleep(for: .seconds(2))
        samples.end = ProcessSample.now()
        say("end (everything stopped): \(samples.end!)")
        return samples
    }

    /// Prints the maintained connection's states as they change. A connection that gives up
    /// (which the policy should never let it) is counted as an error that fails the soak, and
    /// replaced, so that the rest of the soak still measures something.
    private func watch(_ connection: Lock<MaintainedConnection>) async {
        while !Task.isCancelled {
            for await state in connection.withLock({ $0 }).connectionStates() {
                say("connection \(state)")
                ledger.completed("state \(Self.stateKind(state))")
                if case .gaveUp(let error) = state { ledger.failed("connection gave up", error) }
            }
            guard !Task.isCancelled else { return }
            connection.withLock { $0 = adapter.maintainConnection(to: serverAddress, policy: Self.policy) }
        }
    }

    private static func stateKind(_ state: MaintainedConnection.State) -> String {
        switch state {
        case .connecting: "connecting"
        case .connected: "connected"
        case .disconnected: "disconnected"
        case .waiting: "waiting"
        case .gaveUp: "gave up"
        case .stopped: "stopped"
        }
    }

    /// Takes the counter's notifications across reconnections, checking the numbering on each link.
    private func consumeNotifications(_ connection: Lock<MaintainedConnection>) async {
        let counter = CharacteristicID(SoakServer.counter, service: SoakServer.service)
        while !Task.isCancelled {
            var expected: UInt32?
            do {
                for try await event in connection.withLock({ $0 }).notifications(of: counter) {
                    switch event {
                    case .enabled:
                        expected = nil
                        ledger.completed("subscribe")
                    case .interrupted:
                        expected = nil
                        ledger.completed("notification gap")
                    case .value(let bytes):
                        guard let number = UInt32(littleEndian: bytes) else {
                            ledger.lost("notification")
                            continue
                        }
                        if let expected, number != expected {
                            if number > expected {
                                ledger.lost("notification", Int(number - expected))
                                say(
                                    "lost \(number - expected) notification(s) \(ContinuousClock.now - ledger.start) in:"
                                        + " #\(expected) was next, #\(number) came")
                            } else {
                                ledger.duplicated("notification")
                            }
                        }
                        expected = number &+ 1
                        ledger.completed("notification")
                    }
                }
                // The connection was stopped: the soak is ending.
                guard !Task.isCancelled else { return }
                try? await adapter.sleep(for: .seconds(1))
            } catch {
                guard !Task.isCancelled else { return }
                // For example the characteristic was missing on a link made while the server was
                // registering again: subscribe again.
                ledger.failed("subscribe", error)
                try? await adapter.sleep(for: .seconds(1))
            }
        }
    }

    /// Scans for as long as the soak runs, starting again when a scan ends.
    private func scan() async {
        while !Task.isCancelled {
            do {
                let scan = try await adapter.scan(ScanFilter(serviceUUIDs: [SoakServer.service]))
                ledger.completed("scan start")
                for try await _ in scan { ledger.completed("scan result") }
            } catch {
                guard !Task.isCancelled, !(error is CancellationError) else { return }
                ledger.failed("scan", error)
            }
            try? await adapter.sleep(for: .seconds(1))
        }
    }

    /// Writes, reads and echoes numbered values on each link, without pause.
    private func work(_ connection: Lock<MaintainedConnection>) async {
        let value = CharacteristicID(SoakServer.value, service: SoakServer.service)
        var number: UInt32 = 0
        while !Task.isCancelled {
            let connection = connection.withLock { $0 }
            do {
                try await connection.waitUntilConnected(timeout: .seconds(60))
            } catch {
                guard !Task.isCancelled else { return }
                ledger.failed("connect", error)
                try? await adapter.sleep(for: .seconds(1))
                continue
            }
            let peripheral = connection.peripheral
            var step = "l2cap open"
            var channel: L2CAPChannel?
            do {
                let opened = try await peripheral.openL2CAPChannel(psm: SoakServer.psm, timeout: Self.operationTimeout)
                channel = opened
                ledger.completed(step)
                var replies = opened.packets.makeAsyncIterator()
                while !Task.isCancelled {
                    number &+= 1
                    let bytes = number.littleEndianBytes
                    step = "write"
                    try await peripheral.write(bytes, to: value)
                    ledger.completed(step)
                    step = "read"
                    let read = try await peripheral.read(value)
                    if read != bytes { ledger.lost("write read back") }
                    ledger.completed(step)
                    step = "l2cap echo"
                    let packet = bytes + [UInt8](repeating: UInt8(truncatingIfNeeded: number), count: 28)
                    try await opened.send(packet)
                    // A channel that stops echoing is closed after the timeout, which ends `next()`.
                    let watchdog = Task.inheritingExecutor { [adapter] in
                        do {
                            try await adapter.sleep(for: Self.operationTimeout)
                        } catch {
                            return false
                        }
                        await opened.close()
                        return true
                    }
                    let reply = try await replies.next()
                    watchdog.cancel()
                    guard let reply else {
                        if await watchdog.value {
                            throw BluetoothError(
                                .timeout,
                                message: "the echo of packet \(number) took longer than \(Self.operationTimeout)")
                        }
                        throw BluetoothError(.disconnected, message: "the server closed the L2CAP channel")
                    }
                    if reply != packet {
                        let echoed = UInt32(littleEndian: reply) ?? 0
                        if echoed < number { ledger.duplicated("l2cap echo") } else { ledger.lost("l2cap echo") }
                    }
                    ledger.completed(step)
                }
            } catch {
                if !Task.isCancelled && !(error is CancellationError) {
                    ledger.failed(step, error)
                }
            }
            await channel?.close()
            // The link is probably going; give the connection's state time to say so.
            try? await adapter.sleep(for: .seconds(1))
        }
    }

    private func say(_ text: String) {
        console.result(
            "central: \(Console.escaped(text))", json: .object([("side", "central"), ("event", .string(text))]))
    }
}

/// The process samples a soak takes: before any work, a quarter of the way, in the middle (the
/// end of the warm-up), and once everything stopped.
struct SoakSamples: Sendable {
    var baseline: ProcessSample
    var quarter: ProcessSample?
    var middle: ProcessSample?
    var end: ProcessSample?
}
