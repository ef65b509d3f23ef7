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
            .init(
                name: "manufacturer", value: "ID", help: "only devices with manufacturer data of this company ID",
                repeatable: true),
            .init(
                name: "service-data", value: "UUID", help: "only devices with service data of this UUID",
                repeatable: true),
            .init(name: "duplicates", help: "report every advertisement, not each device once"),
            .init(
                name: "passive", help: "scan passively through BlueZ's advertisement monitor (needs --manufacturer)"),
            CommandSpec.json,
        ],
        details: """
            JSON: one {"event":"discovery",…} object per report (with --duplicates, "new" is false for
            a device's later reports), then {"event":"end","count":N}.
            """)

    var adapter: String?
    var timeout: Duration
    var filter: ScanFilter
    var count: Int?
    var passive: PassiveScanFilter?

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = try arguments.adapterName()
        timeout = try arguments.seconds("timeout", default: .seconds(10))
        var services: [BluetoothUUID] = []
        for text in arguments.strings("service") { services.append(try arguments.uuid(text, "service")) }
        filter = ScanFilter(
            serviceUUIDs: services, minimumRSSI: try arguments.int("min-rssi", in: -127...20),
            namePrefix: arguments.string("name-prefix"), allowsDuplicates: arguments.flag("duplicates"))
        for text in arguments.strings("manufacturer") {
            guard let company = AdvertiseCommand.integer(text, as: UInt16.self) else {
                throw UsageError("--manufacturer must be a company ID 0...65535, such as 0x004C")
            }
            filter.manufacturerIDs.append(company)
        }
        for text in arguments.strings("service-data") {
            filter.serviceDataUUIDs.append(try arguments.uuid(text, "service-data"))
        }
        count = try arguments.int("count", in: 1...100_000)
        if arguments.flag("passive") {
            guard !filter.manufacturerIDs.isEmpty else {
                throw UsageError("--passive needs --manufacturer: the advertisement monitor matches patterns")
            }
            passive = PassiveScanFilter(
                patterns: filter.manufacturerIDs.map { .manufacturer($0) }, rssiHighThreshold: filter.minimumRSSI)
        }
    }

    func run(in context: CommandContext) async throws {
        let console = context.console
        let adapter = try await context.adapter(self.adapter)
        let scan: ScanStream
        if let passive {
            scan = try await adapter.passiveScan(passive)
        } else {
            scan = try await adapter.scan(filter)
        }
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

    /// The discovery as one line for people; the name, which the device chose, escaped.
    static func describe(_ discovery: Discovery) -> String {
        let advertisement = discovery.advertisement
        var text =
            "\(discovery.address) (\(Console.escaped(discovery.addressType.rawValue)))"
            + (discovery.isNew ? "" : " update")
        if let name = discovery.name { text += " \"\(Console.escaped(name))\"" }
        if let rssi = discovery.rssi { text += " \(rssi) dBm" }
        if !advertisement.serviceUUIDs.isEmpty {
            text += " services " + advertisement.serviceUUIDs.map { "\($0)" }.joined(separator: ",")
        }
        if !advertisement.solicitedUUIDs.isEmpty {
            text += " solicits " + advertisement.solicitedUUIDs.map { "\($0)" }.joined(separator: ",")
        }
        for (uuid, data) in advertisement.serviceData.sorted(by: { $0.key < $1.key }) {
            text += " data \(uuid)=\(data.hex)"
        }
        for (company, data) in advertisement.manufacturerData.sorted(by: { $0.key < $1.key }) {
            text += " manufacturer 0x" + String(company, radix: 16, uppercase: true) + "=\(data.hex)"
        }
        if let appearance = advertisement.appearance { text += " appearance 0x" + String(appearance, radix: 16) }
        if let power = advertisement.txPowerLevel { text += " tx \(power) dBm" }
        if let flags = advertisement.flags { text += " flags 0x" + [flags.rawValue].hex }
        return text
    }

    static func json(_ discovery: Discovery) -> JSON {
        let advertisement = discovery.advertisement
        return .object([
            ("event", "discovery"),
            ("address", .string("\(discovery.address)")),
            ("addressType", .string(discovery.addressType.rawValue)),
            ("new", .bool(discovery.isNew)),
            ("name", .optional(discovery.name) { .string($0) }),
            ("rssi", .optional(discovery.rssi) { .int($0) }),
            ("txPower", .optional(advertisement.txPowerLevel) { .int($0) }),
            ("appearance", .optional(advertisement.appearance) { .int(Int($0)) }),
            ("flags", .optional(advertisement.flags) { .int(Int($0.rawValue)) }),
            ("services", .array(advertisement.serviceUUIDs.map { .string("\($0)") })),
            ("solicitedServices", .array(advertisement.solicitedUUIDs.map { .string("\($0)") })),
            (
                "serviceData",
                .object(
                    advertisement.serviceData.sorted { $0.key < $1.key }.map { ("\($0.key)", .string($0.value.hex)) })
            ),
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
