import Able

/// `able devices`: the devices the adapter knows, bonded or seen.
struct DevicesCommand: Command {
    static let spec = CommandSpec(
        name: "devices", summary: "list the devices the adapter knows", positionals: [], optionalPositionals: 0,
        options: [CommandSpec.adapter, CommandSpec.json],
        details: """
            The devices BlueZ remembers for the adapter: bonded ones, connected ones, and those a scan
            found recently, with their address type, name and whether each is paired, bonded,
            trusted, blocked and connected.
            """)

    var adapter: String?

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = arguments.string("adapter")
    }

    func run(in context: CommandContext) async throws {
        let adapter = try await context.adapter(self.adapter)
        let known = try await adapter.knownPeripherals()
        for device in known {
            context.console.result(
                Console.escaped("\(device)"),
                json: .object([
                    ("event", "device"), ("address", .string("\(device.address)")),
                    ("addressType", .string(device.addressType.rawValue)),
                    ("name", .optional(device.name) { .string($0) }), ("paired", .bool(device.isPaired)),
                    ("bonded", .bool(device.isBonded)), ("trusted", .bool(device.isTrusted)),
                    ("blocked", .bool(device.isBlocked)), ("connected", .bool(device.isConnected)),
                ]))
        }
        context.console.result(
            "\(known.count) device\(known.count == 1 ? "" : "s")",
            json: .object([("event", "end"), ("count", .int(known.count))]))
    }
}

/// `able forget ADDRESS`: removes a device, its bond and its cached services.
struct ForgetCommand: Command {
    static let spec = CommandSpec(
        name: "forget", summary: "forget a device and its bond", positionals: ["ADDRESS"], optionalPositionals: 0,
        options: [CommandSpec.adapter, CommandSpec.json],
        details: """
            Disconnects the device and makes the adapter forget it: its bond (keys) and its cached GATT
            database go. Fails (status 1) when the adapter does not know ADDRESS.
            """)

    var adapter: String?
    var address: BluetoothAddress

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = arguments.string("adapter")
        address = try arguments.address(arguments.positionals[0])
    }

    func run(in context: CommandContext) async throws {
        let adapter = try await context.adapter(self.adapter)
        try await adapter.peripheral(address: address).forget()
        context.console.result(
            "forgot \(address)", json: .object([("event", "forgotten"), ("address", .string("\(address)"))]))
    }
}

/// `able pair ADDRESS`: connects (scanning when needed), pairs with Just Works, and disconnects.
struct PairCommand: Command {
    static let spec = CommandSpec(
        name: "pair", summary: "pair with a device (Just Works)", positionals: ["ADDRESS"], optionalPositionals: 0,
        options: [
            CommandSpec.adapter, CommandSpec.timeout(30, "connecting and pairing each"),
            .init(name: "trust", help: "also mark the device trusted"), CommandSpec.json,
        ],
        details: """
            Connects to ADDRESS (scanning for it when the adapter does not know it), pairs accepting every
            confirmation (Just Works), prints whether a bond was stored, and disconnects. The bond stays:
            later connections are encrypted without pairing again, until `able forget ADDRESS`.
            """)

    var adapter: String?
    var address: BluetoothAddress
    var timeout: Duration
    var trust: Bool

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = arguments.string("adapter")
        address = try arguments.address(arguments.positionals[0])
        timeout = try arguments.seconds("timeout", default: .seconds(30))
        trust = arguments.flag("trust")
    }

    func run(in context: CommandContext) async throws {
        let adapter = try await context.adapter(self.adapter)
        let (address, timeout, trust, console) = (self.address, self.timeout, self.trust, context.console)
        try await withConnection(to: address, on: adapter, timeout: timeout, console: console) { peripheral in
            console.progress("pairing with \(address)…")
            if await !peripheral.isPaired {
                try await peripheral.pair(with: .justWorks, timeout: timeout)
            }
            if trust { try await peripheral.setTrusted(true) }
            let bonded = await peripheral.isBonded
            let trusted = await peripheral.isTrusted
            console.result(
                "paired with \(address)\(bonded ? ", bonded" : " (no bond stored)")",
                json: .object([
                    ("event", "paired"), ("address", .string("\(address)")), ("bonded", .bool(bonded)),
                    ("trusted", .bool(trusted)),
                ]))
        }
    }
}
