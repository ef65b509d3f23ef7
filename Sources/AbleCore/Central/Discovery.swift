/// One device seen while scanning, with what it advertised.
public struct Discovery: Sendable, Hashable, CustomStringConvertible {
    /// The device's address.
    public var address: BluetoothAddress
    /// Whether the address is public or random.
    public var addressType: BluetoothAddress.AddressType
    /// The received signal strength of the report, in dBm.
    public var rssi: Int?
    /// What the device advertised (BlueZ merges advertising and scan-response data): name,
    /// service and solicited UUIDs, service and manufacturer data, appearance, TX power and,
    /// where BlueZ reports them (`AdvertisingFlags`), the flags.
    public var advertisement: AdvertisementData
    /// Whether this is the scan's first report of the device (`true`), or a later one that
    /// updates it (`false`, delivered only with ``ScanFilter/allowsDuplicates``).
    public var isNew: Bool

    /// Describes a discovery, as a backend reports it (or a test builds one).
    public init(
        address: BluetoothAddress, addressType: BluetoothAddress.AddressType, rssi: Int?,
        advertisement: AdvertisementData, isNew: Bool = true
    ) {
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.advertisement = advertisement
        self.isNew = isNew
    }

    /// The advertised local name, if any.
    public var name: String? { advertisement.localName }

    public var description: String {
        "\(address)" + (name.map { " \"\($0)\"" } ?? "") + (rssi.map { " \($0) dBm" } ?? "")
            + (advertisement.serviceUUIDs.isEmpty ? "" : " \(advertisement.serviceUUIDs)")
            + advertisement.manufacturerData.sorted { $0.key < $1.key }.map {
                " manufacturer 0x\(Hex.format($0.key, digits: 4))=\(Hex.string($0.value))"
            }.joined()
            + advertisement.serviceData.sorted { $0.key < $1.key }.map { " data \($0.key)=\(Hex.string($0.value))" }
            .joined()
    }
}

/// Which discoveries a scan delivers.
///
/// BlueZ merges the discovery filters of every client, so Able applies each scan's filter
/// again to what BlueZ reports: a scan gets exactly what its own filter asks for.
public struct ScanFilter: Sendable, Hashable {
    /// Deliver only devices advertising at least one of these services; empty means any.
    public var serviceUUIDs: [BluetoothUUID]
    /// Deliver only reports at least this strong, in dBm.
    public var minimumRSSI: Int?
    /// Deliver only devices whose advertised name starts with this.
    public var namePrefix: String?
    /// Deliver only devices with manufacturer data of at least one of these company
    /// identifiers; empty means any.
    public var manufacturerIDs: [UInt16]
    /// Deliver only devices with service data for at least one of these UUIDs; empty means any.
    public var serviceDataUUIDs: [BluetoothUUID]
    /// Deliver every report of a device (`true`), or each device once per scan (`false`).
    ///
    /// With duplicates, each report BlueZ announces is delivered, with the values of that
    /// report: a beacon whose manufacturer data changes is followed value by value (BlueZ
    /// announces a change of data; it does not announce a report that repeats the data it has,
    /// unless the RSSI changed).
    public var allowsDuplicates: Bool

    /// A filter; the defaults deliver every device, once per scan.
    public init(
        serviceUUIDs: [BluetoothUUID] = [], minimumRSSI: Int? = nil, namePrefix: String? = nil,
        allowsDuplicates: Bool = false, manufacturerIDs: [UInt16] = [], serviceDataUUIDs: [BluetoothUUID] = []
    ) {
        self.serviceUUIDs = serviceUUIDs
        self.minimumRSSI = minimumRSSI
        self.namePrefix = namePrefix
        self.allowsDuplicates = allowsDuplicates
        self.manufacturerIDs = manufacturerIDs
        self.serviceDataUUIDs = serviceDataUUIDs
    }

    /// Whether `discovery` passes the filter (duplicates are handled by the scan).
    public func matches(_ discovery: Discovery) -> Bool {
        if !serviceUUIDs.isEmpty, Set(serviceUUIDs).isDisjoint(with: discovery.advertisement.serviceUUIDs) {
            return false
        }
        if let minimumRSSI {
            guard let rssi = discovery.rssi, rssi >= minimumRSSI else { return false }
        }
        if let namePrefix {
            guard discovery.name?.hasPrefix(namePrefix) == true else { return false }
        }
        if !manufacturerIDs.isEmpty,
            !manufacturerIDs.contains(where: { discovery.advertisement.manufacturerData[$0] != nil })
        {
            return false
        }
        if !serviceDataUUIDs.isEmpty,
            !serviceDataUUIDs.contains(where: { discovery.advertisement.serviceData[$0] != nil })
        {
            return false
        }
        return true
    }
}
