import Able

/// `able advertise`: advertises the data given on the command line until Ctrl-C or `--duration`.
struct AdvertiseCommand: Command {
    static let spec = CommandSpec(
        name: "advertise", summary: "advertise data (names, UUIDs, service and manufacturer data)", positionals: [],
        options: [
            CommandSpec.adapter,
            .init(name: "name", value: "NAME", help: "the local name (in the scan response; shortened to fit)"),
            .init(name: "service", value: "UUID", help: "a service UUID to advertise", repeatable: true),
            .init(name: "solicit", value: "UUID", help: "a service UUID to solicit", repeatable: true),
            .init(name: "service-data", value: "UUID=HEX", help: "service data of a UUID", repeatable: true),
            .init(name: "manufacturer", value: "ID=HEX", help: "manufacturer data of a company ID", repeatable: true),
            .init(name: "appearance", value: "N", help: "the GAP appearance (decimal or 0x hex)"),
            .init(name: "tx-power", help: "include the TX power level"),
            .init(
                name: "scan-response-service-data", value: "UUID=HEX", help: "service data in the scan response",
                repeatable: true),
            .init(
                name: "scan-response-manufacturer", value: "ID=HEX", help: "manufacturer data in the scan response",
                repeatable: true),
            .init(name: "not-connectable", help: "a broadcast advertisement: no connections, no flags"),
            .init(name: "not-discoverable", help: "without the general discoverable flag"),
            .init(name: "interval", value: "MIN-MAX", help: "the advertising interval range, in ms"),
            .init(name: "power", value: "DBM", help: "the TX power to ask the controller for"),
            .init(name: "secondary", value: "PHY", help: "extended advertising on 1M, 2M or Coded"),
            .init(name: "duration", value: "SECONDS", help: "stop after this long (default: until Ctrl-C)"),
            .init(name: "capabilities", help: "print what the adapter can advertise, and stop"),
            CommandSpec.json,
        ],
        details: """
            Refuses, before BlueZ is asked, what does not fit the adapter (bytes used and available)
            or what it cannot do. JSON: {"event":"advertising",…} with the bytes used, then
            {"event":"stopped"}; with --capabilities, one {"event":"capabilities",…} object.
            """)

    var adapter: String?
    var advertisement: Advertisement
    var duration: Duration?
    var capabilitiesOnly: Bool

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = arguments.string("adapter")
        capabilitiesOnly = arguments.flag("capabilities")
        var advertisement = Advertisement(
            localName: arguments.string("name"), includesTxPower: arguments.flag("tx-power"),
            isDiscoverable: !arguments.flag("not-discoverable"), isConnectable: !arguments.flag("not-connectable"))
        for text in arguments.strings("service") {
            advertisement.serviceUUIDs.append(try arguments.uuid(text, "service"))
        }
        for text in arguments.strings("solicit") {
            advertisement.solicitedUUIDs.append(try arguments.uuid(text, "solicit"))
        }
        for text in arguments.strings("service-data") {
            let (uuid, bytes) = try Self.serviceData(text, arguments, "service-data")
            advertisement.serviceData[uuid] = bytes
        }
        for text in arguments.strings("manufacturer") {
            let (company, bytes) = try Self.manufacturerData(text, "manufacturer")
            advertisement.manufacturerData[company] = bytes
        }
        for text in arguments.strings("scan-response-service-data") {
            let (uuid, bytes) = try Self.serviceData(text, arguments, "scan-response-service-data")
            advertisement.scanResponse.serviceData[uuid] = bytes
        }
        for text in arguments.strings("scan-response-manufacturer") {
            let (company, bytes) = try Self.manufacturerData(text, "scan-response-manufacturer")
            advertisement.scanResponse.manufacturerData[company] = bytes
        }
        if let text = arguments.string("appearance") {
            guard let value = Self.integer(text, as: UInt16.self) else {
                throw UsageError("--appearance must be a number 0...65535, such as 0x0341")
            }
            advertisement.appearance = value
        }
        if let text = arguments.string("interval") {
            let parts = text.split(separator: "-").map { Int($0) }
            guard parts.count == 2, let low = parts[0], let high = parts[1], 20 <= low, low <= high,
                high <= 10_485_759
            else { throw UsageError("--interval must be MIN-MAX in ms, 20 <= MIN <= MAX, such as 100-150") }
            advertisement.interval = .milliseconds(low)...Duration.milliseconds(high)
        }
        advertisement.txPower = try arguments.int("power", in: -127...20)
        if let text = arguments.string("secondary") {
            guard let phy = [AdvertisingPHY.le1M, .le2M, .leCoded].first(where: { $0.rawValue == text }) else {
                throw UsageError("--secondary must be 1M, 2M or Coded")
            }
            advertisement.secondaryChannel = phy
        }
        self.advertisement = advertisement
        duration = arguments.string("duration") == nil ? nil : try arguments.seconds("duration", default: .zero)
    }

    static func integer<T: FixedWidthInteger>(_ text: String, as: T.Type) -> T? {
        text.lowercased().hasPrefix("0x") ? T(text.dropFirst(2), radix: 16) : T(text)
    }

    static func serviceData(
        _ text: String, _ arguments: ParsedArguments, _ option: String
    ) throws(UsageError) -> (BluetoothUUID, [UInt8]) {
        let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let bytes = [UInt8](hex: String(parts[1])) else {
            throw UsageError("--\(option) must be UUID=HEX, such as 181A=0102")
        }
        return (try arguments.uuid(String(parts[0]), option), bytes)
    }

    static func manufacturerData(_ text: String, _ option: String) throws(UsageError) -> (UInt16, [UInt8]) {
        let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let company = integer(String(parts[0]), as: UInt16.self),
            let bytes = [UInt8](hex: String(parts[1]))
        else { throw UsageError("--\(option) must be ID=HEX with a company ID 0...65535, such as 0xFFFF=0102") }
        return (company, bytes)
    }

    func run(in context: CommandContext) async throws {
        let console = context.console
        let adapter = try await context.adapter(self.adapter)
        if capabilitiesOnly {
            let capabilities = try await adapter.advertisingCapabilities()
            console.result(
                "\(adapter.name): \(Console.escaped("\(capabilities)"))",
                json: Self.json(capabilities, adapter: adapter.name))
            return
        }
        let advertising = try await adapter.startAdvertising(advertisement)
        let layout = advertisement.layout
        console.result(
            "advertising on \(adapter.name): \(layout.advertisingDataLength) bytes of advertising data, "
                + "\(layout.scanResponseLength) of scan response" + (duration == nil ? " (Ctrl-C to stop)" : ""),
            json: .object([
                ("event", "advertising"), ("adapter", .string(adapter.name)),
                ("advertisingDataLength", .int(layout.advertisingDataLength)),
                ("scanResponseLength", .int(layout.scanResponseLength)),
            ]))
        _ = try? await withTimeLimit(duration ?? .seconds(86_400 * 365)) {
            while true { try await Task.sleep(for: .seconds(3600)) }
        }
        await advertising.stop()
        console.result("stopped", json: .object([("event", "stopped")]))
    }

    static func json(_ capabilities: AdvertisingCapabilities, adapter: String) -> JSON {
        .object([
            ("event", "capabilities"), ("adapter", .string(adapter)),
            ("availableInstances", .int(capabilities.availableInstances)),
            ("activeInstances", .int(capabilities.activeInstances)),
            ("maximumAdvertisingDataLength", .int(capabilities.maximumAdvertisingDataLength)),
            ("maximumScanResponseLength", .int(capabilities.maximumScanResponseLength)),
            ("includes", .array(capabilities.includes.map(\.rawValue).sorted().map { .string($0) })),
            ("secondaryChannels", .array(capabilities.secondaryChannels.map(\.rawValue).sorted().map { .string($0) })),
            ("canSetTxPower", .bool(capabilities.canSetTxPower)),
            ("supportsParameters", .bool(capabilities.supportsParameters)),
            ("supportsScanResponseData", .bool(capabilities.supportsScanResponseData)),
        ])
    }
}
