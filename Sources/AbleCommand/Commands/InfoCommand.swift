import Able

/// `able info`: an adapter's state, or a peripheral's GATT services.
struct InfoCommand: Command {
    static let spec = CommandSpec(
        name: "info", summary: "show an adapter, or a peripheral's services", positionals: ["ADDRESS"],
        optionalPositionals: 1,
        options: [
            CommandSpec.adapter, CommandSpec.timeout(30, "connecting"),
            .init(name: "read", help: "also read every readable characteristic"), CommandSpec.json,
        ],
        details: """
            Without ADDRESS: the adapter's address, name and state. With ADDRESS: connects, lists its
            services, characteristics (with properties) and descriptors, and disconnects.
            """)

    var adapter: String?
    var address: BluetoothAddress?
    var timeout: Duration
    var readValues: Bool

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = try arguments.adapterName()
        address = try arguments.positional(0).map { text throws(UsageError) in try arguments.address(text) }
        timeout = try arguments.seconds("timeout", default: .seconds(30))
        readValues = arguments.flag("read")
    }

    func run(in context: CommandContext) async throws {
        let console = context.console
        let adapter = try await context.adapter(self.adapter)
        guard let address else {
            let state = await adapter.state
            console.result(
                """
                \(Console.escaped(state.name)) \(state.address.map { "\($0)" } ?? "(no address)") "\(Console.escaped(state.alias))"
                  powered \(state.isPowered), discoverable \(state.isDiscoverable), pairable \(state.isPairable), \
                discovering \(state.isDiscovering)
                """,
                json: .object([
                    ("event", "adapter"), ("name", .string(state.name)),
                    ("address", .optional(state.address) { .string("\($0)") }), ("alias", .string(state.alias)),
                    ("powered", .bool(state.isPowered)), ("discoverable", .bool(state.isDiscoverable)),
                    ("pairable", .bool(state.isPairable)), ("discovering", .bool(state.isDiscovering)),
                ]))
            return
        }
        let readValues = self.readValues
        try await withConnection(to: address, on: adapter, timeout: timeout, console: console) { peripheral in
            var services: [JSON] = []
            var lines = ["\(address)"]
            for service in try await peripheral.services() {
                lines.append("  service \(service.uuid)\(service.isPrimary ? "" : " (secondary)")")
                var characteristics: [JSON] = []
                for characteristic in service.characteristics {
                    var value: [UInt8]?
                    if readValues, characteristic.properties.contains(.read) {
                        value = try? await peripheral.read(CharacteristicID(characteristic.uuid, service: service.uuid))
                    }
                    lines.append(
                        "    characteristic \(characteristic.uuid) [\(characteristic.properties)]"
                            + (value.map { " = \($0.described)" } ?? ""))
                    for descriptor in characteristic.descriptors {
                        lines.append("      descriptor \(descriptor.uuid)")
                    }
                    var members: [(String, JSON)] = [
                        ("uuid", .string("\(characteristic.uuid)")),
                        (
                            "properties",
                            .array(characteristic.properties.flagNames.map { .string($0) })
                        ),
                        ("descriptors", .array(characteristic.descriptors.map { .string("\($0.uuid)") })),
                    ]
                    if let value { members.append(("value", .bytes(value))) }
                    characteristics.append(.object(members))
                }
                services.append(
                    .object([
                        ("uuid", .string("\(service.uuid)")), ("primary", .bool(service.isPrimary)),
                        ("characteristics", .array(characteristics)),
                    ]))
            }
            console.result(
                lines.joined(separator: "\n"),
                json: .object([
                    ("event", "peripheral"), ("address", .string("\(address)")), ("services", .array(services)),
                ]))
        }
    }
}
