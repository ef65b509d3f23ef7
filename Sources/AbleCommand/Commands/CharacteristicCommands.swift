import Able

/// The characteristic that `read`, `write` and `notify` work on: `ADDRESS CHARACTERISTIC`, with
/// `--service`, `--adapter` and `--timeout`.
struct CharacteristicTarget: Sendable {
    static let options: [CommandSpec.Option] = [
        CommandSpec.adapter, .init(name: "service", value: "UUID", help: "the characteristic's service"),
        CommandSpec.timeout(30, "connecting"), CommandSpec.json,
    ]

    var adapter: String?
    var address: BluetoothAddress
    var uuid: BluetoothUUID
    var service: BluetoothUUID?
    var timeout: Duration

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = try arguments.adapterName()
        address = try arguments.address(arguments.positionals[0])
        uuid = try arguments.uuid(arguments.positionals[1], "characteristic")
        service = try arguments.string("service").map { text throws(UsageError) in try arguments.uuid(text, "service") }
        timeout = try arguments.seconds("timeout", default: .seconds(30))
    }

    /// Connects to the peripheral, finds the characteristic, runs `body`, and disconnects.
    func withCharacteristic<T: Sendable>(
        in context: CommandContext, _ body: @Sendable (Peripheral, CharacteristicID) async throws -> T
    ) async throws -> T {
        let adapter = try await context.adapter(self.adapter)
        let (uuid, service) = (self.uuid, self.service)
        return try await withConnection(to: address, on: adapter, timeout: timeout, console: context.console) {
            peripheral in
            try await body(peripheral, try await characteristic(uuid, service: service, of: peripheral))
        }
    }

    /// The JSON members naming the target.
    var json: [(String, JSON)] {
        [("address", .string("\(address)")), ("characteristic", .string("\(uuid)"))]
    }
}

/// `able read`: one characteristic's value.
struct ReadCommand: Command {
    static let spec = CommandSpec(
        name: "read", summary: "read a characteristic", positionals: ["ADDRESS", "CHARACTERISTIC"],
        options: CharacteristicTarget.options,
        details: "Prints the value as hex, and as text when it is printable UTF-8.")

    var target: CharacteristicTarget

    init(_ arguments: ParsedArguments) throws(UsageError) {
        target = try CharacteristicTarget(arguments)
    }

    func run(in context: CommandContext) async throws {
        let value = try await target.withCharacteristic(in: context) { peripheral, characteristic in
            try await peripheral.read(characteristic)
        }
        context.console.result(
            value.described,
            json: .object([("event", "value")] + target.json + [("value", .bytes(value))]))
    }
}

/// `able write`: writes one characteristic.
struct WriteCommand: Command {
    static let spec = CommandSpec(
        name: "write", summary: "write a characteristic", positionals: ["ADDRESS", "CHARACTERISTIC", "VALUE"],
        options: CharacteristicTarget.options + [
            .init(name: "text", help: "VALUE is UTF-8 text (default: hex such as 0a1b or 0a:1b)"),
            .init(name: "without-response", help: "write without response (a command)"),
        ])

    var target: CharacteristicTarget
    var value: [UInt8]
    var type: WriteType

    init(_ arguments: ParsedArguments) throws(UsageError) {
        target = try CharacteristicTarget(arguments)
        let text = arguments.positionals[2]
        if arguments.flag("text") {
            value = Array(text.utf8)
        } else {
            guard let bytes = [UInt8](hex: text) else {
                throw UsageError("VALUE '\(text)' is not hex (use 0a1b or 0a:1b, or --text)")
            }
            value = bytes
        }
        guard value.count <= InputChecks.maximumAttributeLength else {
            throw UsageError(
                "VALUE has \(value.count) bytes; a characteristic holds \(InputChecks.maximumAttributeLength) at most")
        }
        type = arguments.flag("without-response") ? .withoutResponse : .withResponse
    }

    func run(in context: CommandContext) async throws {
        let (value, type) = (self.value, self.type)
        try await target.withCharacteristic(in: context) { peripheral, characteristic in
            try await peripheral.write(value, to: characteristic, type: type)
        }
        context.console.result(
            "wrote \(value.count) byte\(value.count == 1 ? "" : "s") to \(target.uuid)",
            json: .object(
                [("event", "written")] + target.json + [
                    ("value", .bytes(value)), ("withResponse", .bool(type == .withResponse)),
                ]))
    }
}

/// `able notify`: a characteristic's notifications or indications, until a count or Ctrl-C.
struct NotifyCommand: Command {
    static let spec = CommandSpec(
        name: "notify", summary: "print a characteristic's notifications", positionals: ["ADDRESS", "CHARACTERISTIC"],
        options: CharacteristicTarget.options + [
            .init(name: "count", value: "N", help: "stop after N values (default: until Ctrl-C)"),
            .init(name: "reconnect", help: "reconnect after a link loss and subscribe again, printing each gap"),
        ],
        details: """
            Subscribes, prints each value, then unsubscribes and disconnects. With --reconnect the
            connection is kept: after a link loss Able reconnects (waits growing from 0.5 s to 30 s,
            each attempt bounded by --timeout) and subscribes again; the gap is printed
            ("interrupted", then "enabled" in JSON) and the count goes on.
            """)

    var target: CharacteristicTarget
    var count: Int?
    var reconnect: Bool

    init(_ arguments: ParsedArguments) throws(UsageError) {
        target = try CharacteristicTarget(arguments)
        count = try arguments.int("count", in: 1...1_000_000)
        reconnect = arguments.flag("reconnect")
    }

    func run(in context: CommandContext) async throws {
        let console = context.console
        let (uuid, count) = (target.uuid, self.count)
        let received: Int
        if reconnect {
            received = try await runReconnecting(in: context)
        } else {
            received = try await target.withCharacteristic(in: context) { peripheral, characteristic in
                let values = try await peripheral.notifications(of: characteristic)
                console.progress(
                    "subscribed to \(uuid)\(count.map { "; waiting for \($0) values" } ?? " (Ctrl-C to stop)")")
                var received = 0
                for try await value in values {
                    received += 1
                    print(value, index: received, console: console)
                    if let count, received >= count { break }
                }
                return received
            }
        }
        console.result(
            "\(received) value\(received == 1 ? "" : "s") received",
            json: .object([("event", "end"), ("count", .int(received))]))
    }

    private func print(_ value: [UInt8], index: Int, console: Console) {
        console.result(
            "\(index): " + value.described,
            json: .object([
                ("event", "notification"), ("index", .int(index)), ("characteristic", .string("\(target.uuid)")),
                ("value", .bytes(value)),
            ]))
    }

    /// Keeps the connection with ``Adapter/withMaintainedConnection(to:policy:isolation:_:)``.
    private func runReconnecting(in context: CommandContext) async throws -> Int {
        let console = context.console
        let adapter = try await context.adapter(target.adapter)
        let (uuid, service, count) = (target.uuid, target.service, self.count)
        console.progress("connecting to \(target.address) on \(adapter.name), reconnecting after link losses…")
        return try await adapter.withMaintainedConnection(
            to: target.address, policy: ReconnectPolicy(connectTimeout: target.timeout)
        ) { connection in
            let states = Task {
                for await state in connection.connectionStates() { console.progress(Console.escaped("\(state)")) }
            }
            defer { states.cancel() }
            try await connection.waitUntilConnected(timeout: .seconds(365 * 24 * 3600))
            let characteristic = try await characteristic(uuid, service: service, of: connection.peripheral)
            var received = 0
            for try await event in connection.notifications(of: characteristic) {
                switch event {
                case .value(let value):
                    received += 1
                    print(value, index: received, console: console)
                    if let count, received >= count { return received }
                case .interrupted(let reason):
                    console.result(
                        "link lost (\(Console.escaped(reason.message))); values sent until it is back are missed",
                        json: .object([
                            ("event", "interrupted"), ("code", .string("\(reason.code)")),
                            ("reason", .string(reason.message)),
                        ]))
                case .enabled:
                    console.result(
                        "subscribed to \(uuid)\(count.map { "; waiting for \($0) values" } ?? " (Ctrl-C to stop)")",
                        json: .object([("event", "enabled"), ("characteristic", .string("\(uuid)"))]))
                }
            }
            return received
        }
    }
}
