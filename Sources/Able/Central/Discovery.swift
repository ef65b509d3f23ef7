/// One device seen while scanning, with what it advertised.
public struct Discovery: Sendable, Hashable, CustomStringConvertible {
    /// The device's address.
    public var address: BluetoothAddress
    /// Whether the address is public or random.
    public var addressType: BluetoothAddress.AddressType
    /// The received signal strength of the report, in dBm.
    public var rssi: Int?
    /// What the device advertised (BlueZ merges advertising and scan-response data).
    public var advertisement: AdvertisementData

    /// Describes a discovery, as a backend reports it (or a test builds one).
    public init(
        address: BluetoothAddress, addressType: BluetoothAddress.AddressType, rssi: Int?,
        advertisement: AdvertisementData
    ) {
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.advertisement = advertisement
    }

    /// The advertised local name, if any.
    public var name: String? { advertisement.localName }

    public var description: String {
        "\(address)" + (name.map { " \"\($0)\"" } ?? "") + (rssi.map { " \($0) dBm" } ?? "")
            + (advertisement.serviceUUIDs.isEmpty ? "" : " \(advertisement.serviceUUIDs)")
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
    /// Deliver every report of a device (`true`), or each device once per scan (`false`).
    public var allowsDuplicates: Bool

    /// A filter; the defaults deliver every device, once per scan.
    public init(
        serviceUUIDs: [BluetoothUUID] = [], minimumRSSI: Int? = nil, namePrefix: String? = nil,
        allowsDuplicates: Bool = false
    ) {
        self.serviceUUIDs = serviceUUIDs
        self.minimumRSSI = minimumRSSI
        self.namePrefix = namePrefix
        self.allowsDuplicates = allowsDuplicates
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
        return true
    }
}
