import AbleCore
import Testing

/// The advertising data layout BlueZ builds, and the refusals computed from an adapter's capabilities.
struct AdvertisingLayoutTests {
    static let legacy = AdvertisingCapabilities(availableInstances: 5, supportsParameters: true)

    @Test("Solicited UUIDs encode as types 0x14, 0x1F and 0x15 and parse back")
    func solicitedUUIDsRoundTrip() throws {
        let long: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
        let data = AdvertisementData(solicitedUUIDs: [
            BluetoothUUID(uuid16: 0x180D), BluetoothUUID(uuid32: 0x1234_5678), long,
        ])
        let bytes = try data.advertisingBytes
        #expect(Array(bytes[0..<4]) == [0x03, 0x14, 0x0D, 0x18])
        #expect(Array(bytes[4..<10]) == [0x05, 0x1F, 0x78, 0x56, 0x34, 0x12])
        #expect(Array(bytes[10..<12]) == [0x11, 0x15])
        #expect(Array(bytes[12...]) == long.littleEndianBytes)
        #expect(try AdvertisementData(advertisingBytes: bytes).solicitedUUIDs == data.solicitedUUIDs)
        #expect(data.encodedLength == bytes.count)
    }

    @Test("The name goes to the scan response; the rest, with the flags, to the advertising data")
    func layout() {
        let advertisement = Advertisement(
            localName: "sensor", serviceUUIDs: [BluetoothUUID(uuid16: 0x181A)], manufacturerData: [0xFFFF: [1, 2]],
            serviceData: [BluetoothUUID(uuid16: 0x181A): [9]], appearance: 0x0341, includesTxPower: true)
        // flags 3, UUID list 4, service data 5, appearance 4, TX power 3, manufacturer data 6
        #expect(advertisement.layout.advertisingDataLength == 25)
        #expect(advertisement.layout.scanResponseLength == 8)
        var broadcast = advertisement
        broadcast.isConnectable = false
        #expect(broadcast.layout.advertisingDataLength == 22)
    }

    @Test(
        "What does not fit is refused with the bytes used and available",
        arguments: [
            (Advertisement(manufacturerData: [1: Array(repeating: 0, count: 25)]), "needs 32 bytes; 31 are available"),
            (
                Advertisement(
                    localName: "n",
                    scanResponse: AdvertisementData(manufacturerData: [1: Array(repeating: 0, count: 25)])),
                "the scan response needs 32 bytes (with a name of one byte); 31 are available"
            ),
        ])
    func tooLong(advertisement: Advertisement, message: String) {
        var capabilities = Self.legacy
        capabilities.supportsScanResponseData = true
        let error = #expect(throws: BluetoothError.self) { try advertisement.validate(against: capabilities) }
        #expect(error?.code == .valueTooLong)
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }

    @Test("Exactly 31 bytes fit, and a long name is no reason to refuse: BlueZ shortens it")
    func exactlyFits() throws {
        let advertisement = Advertisement(
            localName: String(repeating: "x", count: 100), manufacturerData: [1: Array(repeating: 0, count: 24)])
        #expect(advertisement.layout.advertisingDataLength == 31)
        try advertisement.validate(against: Self.legacy)
    }

    @Test("Extended advertising carries what the adapter reports, with a secondary channel or by itself")
    func extended() throws {
        let long = Advertisement(manufacturerData: [1: Array(repeating: 0, count: 100)])
        var capabilities = Self.legacy
        capabilities.maximumAdvertisingDataLength = 251
        capabilities.secondaryChannels = [.le1M, .le2M]
        let legacyOnly = #expect(throws: BluetoothError.self) { try long.validate(against: capabilities) }
        #expect(legacyOnly?.message.contains("choose a secondary channel") == true)
        var onSecondary = long
        onSecondary.secondaryChannel = .le2M
        try onSecondary.validate(against: capabilities)
        capabilities.extendsAutomatically = true
        try long.validate(against: capabilities)
    }

    @Test("What the adapter or BlueZ cannot do is refused, naming it")
    func unsupported() {
        func refusal(_ advertisement: Advertisement, _ capabilities: AdvertisingCapabilities) -> BluetoothError? {
            #expect(throws: BluetoothError.self) { try advertisement.validate(against: capabilities) }
        }
        var noParameters = Self.legacy
        noParameters.supportsParameters = false
        let interval = refusal(Advertisement(interval: .milliseconds(100)...Duration.milliseconds(200)), noParameters)
        #expect(interval?.code == .notSupported)
        #expect(interval?.message.contains("bluetoothd -E") == true)
        let power = refusal(Advertisement(txPower: 0), Self.legacy)
        #expect(power?.code == .notSupported)
        #expect(power?.message.contains("CanSetTxPower") == true)
        let channel = refusal(Advertisement(secondaryChannel: .leCoded), Self.legacy)
        #expect(channel?.code == .notSupported)
        #expect(channel?.message.contains("legacy advertising only") == true)
        let response = refusal(
            Advertisement(scanResponse: AdvertisementData(serviceUUIDs: [.heartRate])), Self.legacy)
        #expect(response?.code == .notSupported)
        #expect(response?.message.contains("5.80") == true)
        var noTxPower = Self.legacy
        noTxPower.includes = []
        #expect(refusal(Advertisement(includesTxPower: true), noTxPower)?.code == .notSupported)
        var full = Self.legacy
        full.availableInstances = 0
        full.activeInstances = 5
        let instances = refusal(Advertisement(), full)
        #expect(instances?.code == .notAvailable)
        #expect(instances?.message.contains("5 advertising set(s) run") == true)
    }

    @Test(
        "Values outside their ranges are refused whatever the adapter",
        arguments: [
            Advertisement(interval: .milliseconds(10)...Duration.milliseconds(200)),
            Advertisement(txPower: 21),
            Advertisement(timeout: .zero),
            Advertisement(scanResponse: AdvertisementData(localName: "name")),
        ])
    func outOfRange(advertisement: Advertisement) {
        var capabilities = Self.legacy
        capabilities.canSetTxPower = true
        capabilities.supportsScanResponseData = true
        let error = #expect(throws: BluetoothError.self) { try advertisement.validate(against: capabilities) }
        #expect(error?.code == .invalidArguments)
    }

    @Test("A TX power outside the controller's range is refused with the range")
    func txPowerRange() {
        var capabilities = Self.legacy
        capabilities.canSetTxPower = true
        capabilities.txPowerRange = -20...10
        let error = #expect(throws: BluetoothError.self) {
            try Advertisement(txPower: 15).validate(against: capabilities)
        }
        #expect(error?.message.contains("-20...10 dBm") == true)
    }

    @Test("Filters by manufacturer identifier and service-data UUID apply on Able's side")
    func filters() {
        let discovery = Discovery(
            address: "00:00:00:00:00:01", addressType: .public, rssi: -40,
            advertisement: AdvertisementData(
                manufacturerData: [0x004C: [1]], serviceData: [BluetoothUUID(uuid16: 0xFEAA): [2]]))
        #expect(ScanFilter(manufacturerIDs: [0x004C]).matches(discovery))
        #expect(!ScanFilter(manufacturerIDs: [0x0059]).matches(discovery))
        #expect(ScanFilter(serviceDataUUIDs: [BluetoothUUID(uuid16: 0xFEAA)]).matches(discovery))
        #expect(!ScanFilter(serviceDataUUIDs: [.heartRate]).matches(discovery))
        #expect(
            ScanFilter(manufacturerIDs: [0x0059, 0x004C], serviceDataUUIDs: [BluetoothUUID(uuid16: 0xFEAA)]).matches(
                discovery))
    }
}

/// The patterns of a passive scan.
struct AdvertisementPatternTests {
    @Test("A pattern matches bytes at an offset in the data of a structure of its type")
    func patterns() {
        let data = AdvertisementData(manufacturerData: [0xFFFF: [0xBE, 0x01, 0x07]], serviceData: [.heartRate: [9]])
        #expect(AdvertisementPattern.manufacturer(0xFFFF, prefix: [0xBE, 0x01]).matches(data))
        #expect(!AdvertisementPattern.manufacturer(0xFFFF, prefix: [0xBE, 0x02]).matches(data))
        #expect(!AdvertisementPattern.manufacturer(0x004C).matches(data))
        #expect(AdvertisementPattern(adType: 0xFF, offset: 4, bytes: [0x07]).matches(data))
        #expect(!AdvertisementPattern(adType: 0xFF, offset: 4, bytes: [0x07, 0x08]).matches(data))
        #expect(AdvertisementPattern(adType: 0x16, bytes: [0x0D, 0x18, 0x09]).matches(data))
        let filter = PassiveScanFilter(
            patterns: [.manufacturer(0x004C), .manufacturer(0xFFFF)], rssiHighThreshold: -60)
        let near = Discovery(address: "00:00:00:00:00:01", addressType: .public, rssi: -50, advertisement: data)
        var far = near
        far.rssi = -70
        #expect(filter.matches(near))
        #expect(!filter.matches(far))
    }
}
