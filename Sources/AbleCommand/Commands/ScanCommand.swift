import Able

/// `able scan`: what an adapter discovers, with BlueZ's filters, until a timeout, a count or
/// Ctrl-C.
struct ScanCommand: Command {
    static let spec = CommandSpec(
        name: "scan", summary: "scan for advertising devices", positionals: [],
        options: [
            CommandSpec.adapter,
            CommandSpec.timeout(10, "the scan"),
            .init(name: "service", value: "UUID", help: "only devices advertising this service", repeatable: true),
            .init(name: "name-prefix", value: "TEXT", help: "only devices whose name starts with TEXT"),
            .init(name: "min-rssi", value: "DBM", help: "only devices heard at least this strongly"),
            .init(name: "count", value: "N", help: "stop after N devices"),
            .init(name: "duplicates", help: "report every advertisement, not each device once"),
            CommandSpec.json,
        ],
        details: "JSON: one {\"event\":\"discovery\",…} object per device, then {\"event\":\"end\",\"count\":N}.")

    var adapter: String?
    var timeout: Duration
    var filter: ScanFilter
    var count: Int?

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = try arguments.adapterName()
        timeout = try arguments.seconds("timeout", default: .seconds(10))
        var services: [BluetoothUUID] = []
        for text in arguments.strings("service") { services.append(try arguments.uuid(text, "service")) }
        filter = ScanFilter(
            serviceUUIDs: services, minimumRSSI: try arguments.int("min-rssi", in: -127...20),
            namePrefix: arguments.string("name-prefix"), allowsDuplicates: arguments.flag("duplicates"))
        count = try arguments.int("count", in: 1...100_000)
    }

    func run(in context: CommandContext) async throws {
        let console = context.console
        let adapter = try await context.adapter(self.adapter)
        let scan = try await adapter.scan(filter)
        console.progress("scanning on \(adapter.name) for \(timeout.seconds) s (Ctrl-C to stop)…")
        let limit = count
        let counter = Counter()
        _ = try await withTimeLimit(timeout, sleep: adapter.sleep(for:)) {
            for try await discovery in scan {
                console.result(Self.describe(discovery), json: Self.json(discovery))
                let total = counter.increment()
                if let limit, total >= limit { break }
            }
        }
        let found = counter.value
        console.result(
            "\(found) device\(found == 1 ? "" : "s") found",
            json: .object([("event", "end"), ("count", .int(found))]))
    }

    static func describe(_ discovery: Discovery) -> String {
        var text = "\(discovery.address) (\(discovery.addressType))"
        if let name = discovery.name { text += " \"\(name)\"" }
        if let rssi = discovery.rssi { text += " \(rssi) dBm" }
        if !discovery.advertisement.serviceUUIDs.isEmpty {
            text += " services " + discovery.advertisement.serviceUUIDs.map { "\($0)" }.joined(separator: ",")
        }
        return text
    }

    static func json(_ discovery: Discovery) -> JSON {
        let advertisement = discovery.advertisement
        return .object([
            ("event", "discovery"),
            ("address", .string("\(discovery.address)")),
            ("addressType", .string(discovery.addressType.rawValue)),
            ("name", .optional(discovery.name) { .string($0) }),
            ("rssi", .optional(discovery.rssi) { .int($0) }),
            ("services", .array(advertisement.serviceUUIDs.map { .string("\($0)") })),
            (
                "manufacturerData",
                .object(
                    advertisement.manufacturerData.sorted { $0.key < $1.key }.map {
                        ("\($0.key)", .string($0.value.hex))
                    })
            ),
        ])
    }
}
