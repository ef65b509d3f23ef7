import Able
import AbleCommand
import AbleIO

/// The server side of `able-soak`: an Able GATT server and an L2CAP echo that keep serving
/// while the soak injects faults around them.
///
/// It serves one service: a counter that is notified every 250 ms while a central is subscribed
/// (a little-endian `UInt32` that grows by exactly one per notification sent, so that the central
/// can tell a lost value from a duplicated one), and a value that centrals write and read back.
/// It listens for L2CAP channels on the fixed PSM ``psm`` and echoes every SDU.
///
/// What it survives, as a long-running app must, it survives through the library: the one
/// ``GATTServer`` and ``AdvertisingSet`` it starts register again by themselves when
/// `bluetoothd` restarts (the server reports the gap, which the server side prints); the adapter
/// powered off and on again gets its advertisement again. The L2CAP listener is a kernel socket:
/// it needs neither.
struct SoakServer: Sendable {
    static let service: BluetoothUUID = "5C0A0001-7E3D-4B1A-9C55-0A1B2C3D4E5F"
    static let counter: BluetoothUUID = "5C0A0002-7E3D-4B1A-9C55-0A1B2C3D4E5F"
    static let value: BluetoothUUID = "5C0A0003-7E3D-4B1A-9C55-0A1B2C3D4E5F"
    /// The L2CAP PSM the server listens on: fixed, so that a restarted server is found again.
    static let psm = PSM(rawValue: 0x00A5)
    static let notificationInterval = Duration.milliseconds(250)

    let adapter: Adapter
    let console: Console

    /// What the server has started.
    private struct Serving {
        var server: GATTServer?
        var advertising: AdvertisingSet?
    }

    /// Serves until cancelled.
    func run() async throws {
        let listener = try await adapter.listenL2CAP(psm: Self.psm)
        say("L2CAP listening on \(listener.psm)")
        let echoes = Task.inheritingExecutor { await echo(listener.channels) }
        let current = Lock<GATTServer?>(nil)
        let notifier = Task.inheritingExecutor { await notify(current) }
        // Whether the adapter was powered off since the last look; read and cleared by the loop below.
        let unpowered = Lock(false)
        let watcher = Task.inheritingExecutor { [adapter] in
            // A power-off is the adapter going from powered to unpowered while present. A stopping
            // bluetoothd powers its adapters off before removing them: the adapter going away
            // after that makes it a restart, which the library rides out.
            var wasPowered = false
            for await state in await adapter.stateChanges() {
                if wasPowered, state.isPresent, !state.isPowered { unpowered.withLock { $0 = true } }
                if !state.isPresent { unpowered.withLock { $0 = false } }
                wasPowered = state.isPresent && state.isPowered
            }
        }
        var serving = Serving()
        while !Task.isCancelled {
            let state = await adapter.state
            if unpowered.withLock({ $0 }), state.isPowered, let advertising = serving.advertising {
                unpowered.withLock { $0 = false }
                say("adapter powered on again: advertising again")
                await advertising.stop()
                serving.advertising = nil
            }
            // Started once; a bluetoothd restart is the library's to ride out.
            if state.isPresent, state.isPowered {
                await open(&serving, current: current)
            }
            try? await adapter.sleep(for: .milliseconds(500))
        }
        watcher.cancel()
        notifier.cancel()
        current.withLock { $0 = nil }
        await serving.advertising?.stop()
        await serving.server?.close()
        await listener.close()
        await echoes.value
        await notifier.value
        await watcher.value
        say("closed")
    }

    /// Starts what is missing: the GATT server first, then the advertisement.
    private func open(_ serving: inout Serving, current: Lock<GATTServer?>) async {
        do {
            if serving.server == nil {
                let server = try await GATTServer.start(on: adapter, definition: definition())
                serving.server = server
                current.withLock { $0 = server }
                say("GATT server registered")
            }
            if serving.advertising == nil {
                serving.advertising = try await adapter.startAdvertising(
                    Advertisement(localName: "soak", serviceUUIDs: [Self.service]))
                say("advertising")
            }
        } catch {
            say("could not serve yet: \(describe(error))")
        }
    }

    /// Notifies the counter while a central is subscribed, numbering each value sent.
    private func notify(_ current: Lock<GATTServer?>) async {
        var sent: UInt32 = 0
        while !Task.isCancelled {
            do {
                try await adapter.sleep(for: Self.notificationInterval)
            } catch {
                return
            }
            guard let server = current.withLock({ $0 }),
                await server.isSubscribed(CharacteristicID(Self.counter, service: Self.service))
            else { continue }
            // Counted only once sent, so that a value that failed leaves no hole in the numbering.
            if (try? await server.notify(
                CharacteristicID(Self.counter, service: Self.service), value: (sent + 1).littleEndianBytes)) != nil
            {
                sent += 1
            }
        }
    }

    /// Echoes every SDU on every channel until the listener is closed.
    private func echo(_ channels: L2CAPChannelStream) async {
        await withDiscardingTaskGroup { group in
            do {
                for try await channel in channels {
                    group.addTask {
                        do {
                            for try await packet in channel.packets { try await channel.send(packet) }
                        } catch {
                            // A channel that fails ends with its link; the next link opens another.
                        }
                        await channel.close()
                    }
                }
            } catch {
                say("L2CAP listener failed: \(describe(error))")
            }
        }
    }

    private func say(_ text: String) {
        console.result(
            "server: \(Console.escaped(text))", json: .object([("side", "server"), ("event", .string(text))]))
    }

    /// The server's definition; it prints the gaps in serving that a `bluetoothd` restart makes.
    func definition() -> GATTServerDefinition {
        GATTServerDefinition {
            Service(Self.service) {
                Characteristic(Self.counter, properties: .notify)
                Characteristic(Self.value, properties: [.read, .write], value: [0, 0, 0, 0])
            }
            AutoManageDevices()
            OnServingChange { [console] _, change in
                let text =
                    change.isServing
                    ? "GATT server serving again" : "GATT server not serving: \(change.reason.map(describe) ?? "")"
                console.result(
                    "server: \(Console.escaped(text))", json: .object([("side", "server"), ("event", .string(text))]))
            }
        }
    }
}

/// An error as the soak prints it: the code and message of a ``BluetoothError``, else its type.
func describe(_ error: any Error) -> String {
    if let error = error as? BluetoothError { return AbleCommand.describe(error) }
    return "\(type(of: error)): \(error)"
}

extension UInt32 {
    /// The four bytes, least significant first.
    var littleEndianBytes: [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: self >> ($0 * 8)) } }

    /// The number in the first four bytes of `bytes`, least significant first.
    init?(littleEndian bytes: [UInt8]) {
        guard bytes.count >= 4 else { return nil }
        self = (0..<4).reduce(0) { $0 | UInt32(bytes[$1]) << ($1 * 8) }
    }
}
