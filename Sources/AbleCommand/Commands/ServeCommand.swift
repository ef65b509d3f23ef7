import Able

/// `able serve`: a small example GATT server, advertised until Ctrl-C or `--duration`.
///
/// It serves the Battery Service (a level that falls by one each interval and is notified to
/// subscribers) and a message characteristic that centrals read and write, and prints what
/// centrals do.
struct ServeCommand: Command {
    static let messageService: BluetoothUUID = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
    static let messageCharacteristic: BluetoothUUID = "6E400002-B5A3-F393-E0A9-E50E24DCCA9E"

    static let spec = CommandSpec(
        name: "serve", summary: "serve an example GATT server and advertise it", positionals: [],
        options: [
            CommandSpec.adapter,
            .init(name: "name", value: "NAME", help: "the advertised local name (default able)"),
            .init(name: "interval", value: "SECONDS", help: "how often the battery level falls (default 1)"),
            .init(name: "duration", value: "SECONDS", help: "stop after this long (default: until Ctrl-C)"),
            .init(name: "secure", help: "the message needs an encrypted link: a central pairs to use it"),
            .init(
                name: "pairing", value: "accept|refuse",
                help: "answer pairing while serving (default: accept with --secure, else not at all)"),
            CommandSpec.json,
        ],
        details: """
            Services: Battery (180F: level 2A19, read and notify) and a message service
            (\(messageService): \(messageCharacteristic), read and write, initially "hello").
            With --pairing, the adapter's standing pairing agent answers every central that pairs
            (numeric comparison or Just Works) and prints each request; Able is the system's
            default pairing agent meanwhile, in place of any other program's; with --secure, reading or
            writing the message makes a central pair first.
            """)

    /// How the server answers pairing.
    enum Pairing: String {
        case accept, refuse
    }

    var adapter: String?
    var name: String
    var interval: Duration
    var duration: Duration?
    var secure: Bool
    var pairing: Pairing?

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = try arguments.adapterName()
        name = arguments.string("name") ?? "able"
        guard !name.isEmpty else { throw UsageError("--name cannot be empty") }
        guard name.utf8.count <= 20 else { throw UsageError("--name must fit an advertisement: 20 bytes at most") }
        interval = try arguments.seconds("interval", default: .seconds(1))
        duration = arguments.string("duration") == nil ? nil : try arguments.seconds("duration", default: .zero)
        secure = arguments.flag("secure")
        if let answer = arguments.string("pairing") {
            guard let pairing = Pairing(rawValue: answer) else {
                throw UsageError("--pairing must be accept or refuse, not '\(answer)'")
            }
            self.pairing = pairing
        } else {
            pairing = secure ? .accept : nil
        }
    }

    func run(in context: CommandContext) async throws {
        let adapter = try await context.adapter(self.adapter)
        guard let pairing else { return try await serve(on: adapter, console: context.console) }
        // A central pairing with the server asks the system's default agent: be it while serving.
        try await adapter.withPairingAgent(Self.agent(pairing, console: context.console), asSystemDefault: true) {
            try await serve(on: adapter, console: context.console)
        }
    }

    /// An agent that answers every request as `pairing` says and prints it.
    static func agent(_ pairing: Pairing, console: Console) -> PairingAgent {
        let accept = pairing == .accept
        return PairingAgent(
            capability: .displayYesNo,
            confirm: { device, passkey in
                console.result(
                    "pairing with \(device)\(passkey == 0 ? "" : " (\(passkey))"): \(accept ? "accepted" : "refused")",
                    json: .object([
                        ("event", "pairing"), ("central", .string("\(device)")), ("passkey", .int(Int(passkey))),
                        ("accepted", .bool(accept)),
                    ]))
                return accept
            },
            display: { device, passkey in
                console.result(
                    "passkey for \(device): \(passkey)",
                    json: .object([
                        ("event", "passkey"), ("central", .string("\(device)")), ("passkey", .int(Int(passkey))),
                    ]))
            })
    }

    private func serve(on adapter: Adapter, console: Console) async throws {
        let server = try await GATTServer.start(
            on: adapter, definition: Self.definition(console: console, secure: secure))
        let advertising: AdvertisingSet
        do {
            advertising = try await adapter.startAdvertising(
                Advertisement(localName: name, serviceUUIDs: [.batteryService]))
        } catch {
            await server.close()
            throw error
        }
        console.result(
            "serving on \(adapter.name) as \"\(name)\"" + (duration == nil ? " (Ctrl-C to stop)" : ""),
            json: .object([("event", "serving"), ("adapter", .string(adapter.name)), ("name", .string(name))]))
        let interval = self.interval
        // The adapter's clock: a simulated adapter serves for simulated time.
        _ = try? await withTimeLimit(duration ?? .seconds(86_400 * 365), sleep: adapter.sleep(for:)) {
            var level: UInt8 = 100
            let batteryLevel = CharacteristicID(.batteryLevel, service: .batteryService)
            while true {
                try await adapter.sleep(for: interval)
                level = level > 1 ? level - 1 : 100
                try? await server.setValue([level], of: batteryLevel)
                if await server.isSubscribed(batteryLevel) {
                    try? await server.notify(batteryLevel, value: [level])
                }
            }
        }
        await advertising.stop()
        await server.close()
        console.result("stopped", json: .object([("event", "stopped")]))
    }

    static func definition(console: Console, secure: Bool = false) -> GATTServerDefinition {
        GATTServerDefinition {
            Service(.batteryService) {
                Characteristic(.batteryLevel, properties: [.read, .notify], value: [100])
            }
            Service(messageService) {
                Characteristic(
                    messageCharacteristic, properties: [.read, .write],
                    permissions: secure ? [.readEncrypted, .writeEncrypted] : nil, value: Array("hello".utf8))
            }
            AutoManageDevices()
            OnRead(.anyCharacteristic, answering: .immediately) { request in
                console.result(
                    "read \(request.uuid) by \(request.central.map { "\($0.address)" } ?? "a central")",
                    json: .object([
                        ("event", "read"), ("characteristic", .string("\(request.uuid)")),
                        ("central", .optional(request.central) { .string("\($0.address)") }),
                    ]))
                return request.storedValue
            }
            OnWrite(.anyCharacteristic, answering: .immediately) { request in
                console.result(
                    "write \(request.uuid) = \(request.value.described)",
                    json: .object([
                        ("event", "write"), ("characteristic", .string("\(request.uuid)")),
                        ("value", .bytes(request.value)),
                        ("central", .optional(request.central) { .string("\($0.address)") }),
                    ]))
                return .store
            }
            OnConnectionStateChange { _, change in
                console.result(
                    "\(change.central.address) \(change.isConnected ? "connected" : "disconnected")"
                        + (change.reason.map { " (\(Console.escaped($0)))" } ?? ""),
                    json: .object([
                        ("event", change.isConnected ? "connected" : "disconnected"),
                        ("central", .string("\(change.central.address)")),
                        ("reason", .optional(change.reason) { .string($0) }),
                    ]))
            }
            OnSubscriptionChange { _, central, uuid, isSubscribed in
                console.result(
                    "\(uuid) \(isSubscribed ? "subscribed" : "unsubscribed")",
                    json: .object([
                        ("event", isSubscribed ? "subscribed" : "unsubscribed"), ("characteristic", .string("\(uuid)")),
                        ("central", .optional(central) { .string("\($0.address)") }),
                    ]))
            }
        }
    }
}
