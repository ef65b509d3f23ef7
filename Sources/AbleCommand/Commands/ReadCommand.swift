import Able

/// `able read`: one characteristic's value.
struct ReadCommand: Command {
    static let spec = CommandSpec(
        name: "read", summary: "read a characteristic", positionals: ["ADDRESS", "CHARACTERISTIC"],
        options: [
            CommandSpec.adapter, .init(name: "service", value: "UUID", help: "the characteristic's service"),
            CommandSpec.timeout(30, "connecting"), CommandSpec.json,
        ],
        details: "Prints the value as hex, and as text when it is printable UTF-8.")

    var adapter: String?
    var address: BluetoothAddress
    var uuid: BluetoothUUID
    var service: BluetoothUUID?
    var timeout: Duration

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = arguments.string("adapter")
        address = try arguments.address(arguments.positionals[0])
        uuid = try arguments.uuid(arguments.positionals[1], "characteristic")
        service = try arguments.string("service").map { text throws(UsageError) in try arguments.uuid(text, "service") }
        timeout = try arguments.seconds("timeout", default: .seconds(30))
    }

    func run(in context: CommandContext) async throws {
        let adapter = try await context.adapter(self.adapter)
        let (uuid, service) = (self.uuid, self.service)
        let value = try await withConnection(to: address, on: adapter, timeout: timeout, console: context.console) {
            peripheral in
            try await peripheral.read(try await characteristic(uuid, service: service, of: peripheral))
        }
        context.console.result(
            value.hex + (value.printableText.map { " \"\($0)\"" } ?? ""),
            json: .object([
                ("event", "value"), ("address", .string("\(address)")), ("characteristic", .string("\(uuid)")),
                ("value", .bytes(value)),
            ]))
    }
}

/// `able write`: writes one characteristic.
struct WriteCommand: Command {
    static let spec = CommandSpec(
        name: "write", summary: "write a characteristic", positionals: ["ADDRESS", "CHARACTERISTIC", "VALUE"],
        options: [
            CommandSpec.adapter, .init(name: "service", value: "UUID", help: "the characteristic's service"),
            .init(name: "text", help: "VALUE is UTF-8 text (default: hex such as 0a1b or 0a:1b)"),
            .init(name: "without-response", help: "write without response (a command)"),
            CommandSpec.timeout(30, "connecting"), CommandSpec.json,
        ])

    var adapter: String?
    var address: BluetoothAddress
    var uuid: BluetoothUUID
    var service: BluetoothUUID?
    var value: [UInt8]
    var type: WriteType
    var timeout: Duration

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = arguments.string("adapter")
        address = try arguments.address(arguments.positionals[0])
        uuid = try arguments.uuid(arguments.positionals[1], "characteristic")
        service = try arguments.string("service").map { text throws(UsageError) in try arguments.uuid(text, "service") }
        let text = arguments.positionals[2]
        if arguments.flag("text") {
            value = Array(text.utf8)
        } else {
            guard let bytes = [UInt8](hex: text) else {
                throw UsageError("VALUE '\(text)' is not hex (use 0a1b or 0a:1b, or --text)")
            }
            value = bytes
        }
        type = arguments.flag("without-response") ? .withoutResponse : .withResponse
        timeout = try arguments.seconds("timeout", default: .seconds(30))
    }

    func run(in context: CommandContext) async throws {
        let adapter = try await context.adapter(self.adapter)
        let (uuid, service, value, type) = (self.uuid, self.service, self.value, self.type)
        try await withConnection(to: address, on: adapter, timeout: timeout, console: context.console) { peripheral in
            try await peripheral.write(
                value, to: try await characteristic(uuid, service: service, of: peripheral), type: type)
        }
        context.console.result(
            "wrote \(value.count) byte\(value.count == 1 ? "" : "s") to \(uuid)",
            json: .object([
                ("event", "written"), ("address", .string("\(address)")), ("characteristic", .string("\(uuid)")),
                ("value", .bytes(value)), ("withResponse", .bool(type == .withResponse)),
            ]))
    }
}

/// `able notify`: a characteristic's notifications or indications, until a count or Ctrl-C.
struct NotifyCommand: Command {
    static let spec = CommandSpec(
        name: "notify", summary: "print a characteristic's notifications", positionals: ["ADDRESS", "CHARACTERISTIC"],
        options: [
            CommandSpec.adapter, .init(name: "service", value: "UUID", help: "the characteristic's service"),
            .init(name: "count", value: "N", help: "stop after N values (default: until Ctrl-C)"),
            CommandSpec.timeout(30, "connecting"), CommandSpec.json,
        ],
        details: "Subscribes, prints each value, then unsubscribes and disconnects.")

    var adapter: String?
    var address: BluetoothAddress
    var uuid: BluetoothUUID
    var service: BluetoothUUID?
    var count: Int?
    var timeout: Duration

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = arguments.string("adapter")
        address = try arguments.address(arguments.positionals[0])
        uuid = try arguments.uuid(arguments.positionals[1], "characteristic")
        service = try arguments.string("service").map { text throws(UsageError) in try arguments.uuid(text, "service") }
        count = try arguments.int("count", in: 1...1_000_000)
        timeout = try arguments.seconds("timeout", default: .seconds(30))
    }

    func run(in context: CommandContext) async throws {
        let console = context.console
        let adapter = try await context.adapter(self.adapter)
        let (uuid, service, count, address) = (self.uuid, self.service, self.count, self.address)
        let received = try await withConnection(to: address, on: adapter, timeout: timeout, console: console) {
            peripheral in
            let values = try await peripheral.notifications(
                of: try await characteristic(uuid, service: service, of: peripheral))
            console.progress(
                "subscribed to \(uuid)\(count.map { "; waiting for \($0) values" } ?? " (Ctrl-C to stop)")")
            var received = 0
            for try await value in values {
                received += 1
                console.result(
                    "\(received): " + value.hex + (value.printableText.map { " \"\($0)\"" } ?? ""),
                    json: .object([
                        ("event", "notification"), ("index", .int(received)), ("characteristic", .string("\(uuid)")),
                        ("value", .bytes(value)),
                    ]))
                if let count, received >= count { break }
            }
            return received
        }
        console.result(
            "\(received) value\(received == 1 ? "" : "s") received",
            json: .object([("event", "end"), ("count", .int(received))]))
    }
}
