/// One pattern of an advertisement monitor: bytes expected at an offset in the data of an AD
/// structure of a given type.
///
/// The corresponding BlueZ value is one entry of `org.bluez.AdvertisementMonitor1.Patterns`
/// (`a(yyay)`: start position, AD data type, content).
public struct AdvertisementPattern: Sendable, Hashable {
    /// The AD data type, such as `0xFF` for manufacturer data (Assigned Numbers, "Common Data Types").
    public var adType: UInt8
    /// Where `bytes` start in the structure's data, after its length and type bytes.
    public var offset: Int
    /// The bytes expected there, 1 to 31 of them.
    public var bytes: [UInt8]

    /// A pattern of `bytes` at `offset` in the data of AD structures of type `adType`.
    public init(adType: UInt8, offset: Int = 0, bytes: [UInt8]) {
        self.adType = adType
        self.offset = offset
        self.bytes = bytes
    }

    /// Manufacturer data of `company` (little-endian, as sent) starting with `prefix`.
    public static func manufacturer(_ company: UInt16, prefix: [UInt8] = []) -> AdvertisementPattern {
        AdvertisementPattern(adType: 0xFF, bytes: [UInt8(truncatingIfNeeded: company), UInt8(company >> 8)] + prefix)
    }

    /// Whether `data`, as encoded for the air, has a structure that matches.
    public func matches(_ data: AdvertisementData) -> Bool {
        guard let encoded = try? data.advertisingBytes else { return false }
        var index = 0
        while index + 1 < encoded.count {
            let length = Int(encoded[index])
            let value = encoded[(index + 2)..<min(encoded.count, index + 1 + length)]
            if encoded[index + 1] == adType, value.count >= offset + bytes.count,
                value.dropFirst(offset).prefix(bytes.count).elementsEqual(bytes)
            {
                return true
            }
            index += 1 + length
        }
        return false
    }
}

/// What a passive scan delivers: devices whose advertising data matches any of the patterns.
///
/// A passive scan sends no scan requests: the controller listens, and BlueZ tells Able about a
/// device when its advertisements start to match (and, with RSSI thresholds, are strong enough).
public struct PassiveScanFilter: Sendable, Hashable {
    /// The patterns, or-ed: one matching is enough. At least one is needed.
    public var patterns: [AdvertisementPattern]
    /// A device is reported once its RSSI is at least this (dBm), or `nil` for BlueZ's default.
    public var rssiHighThreshold: Int?
    /// A reported device is lost once its RSSI stays below this (dBm), or `nil` for BlueZ's default.
    public var rssiLowThreshold: Int?

    /// A filter of `patterns`, with optional RSSI thresholds.
    public init(patterns: [AdvertisementPattern], rssiHighThreshold: Int? = nil, rssiLowThreshold: Int? = nil) {
        self.patterns = patterns
        self.rssiHighThreshold = rssiHighThreshold
        self.rssiLowThreshold = rssiLowThreshold
    }

    /// Whether `discovery` passes: a pattern matches, and the RSSI is at least the high threshold.
    public func matches(_ discovery: Discovery) -> Bool {
        if let rssiHighThreshold {
            guard let rssi = discovery.rssi, rssi >= rssiHighThreshold else { return false }
        }
        return patterns.contains { $0.matches(discovery.advertisement) }
    }

    func validate() throws {
        guard !patterns.isEmpty else {
            throw BluetoothError(.invalidArguments, message: "a passive scan needs at least one pattern")
        }
        for pattern in patterns where pattern.bytes.isEmpty || pattern.offset + pattern.bytes.count > 31 {
            throw BluetoothError(
                .invalidArguments, message: "a pattern holds 1 to 31 bytes and ends within 31 bytes of its structure")
        }
        for threshold in [rssiHighThreshold, rssiLowThreshold].compactMap({ $0 }) where !(-127...20).contains(threshold)
        {
            throw BluetoothError(
                .invalidArguments, message: "an RSSI threshold of \(threshold) dBm is outside -127...20")
        }
    }
}

extension AdapterBackend {
    /// No passive scanning, for a backend that does not say otherwise.
    package func passiveScan(_ filter: PassiveScanFilter, into continuation: ScanStream.Continuation) async throws {
        throw BluetoothError(.unsupported, message: "this backend has no passive scanning")
    }
}

extension Adapter {
    /// Scans passively: the controller listens without sending scan requests, and BlueZ reports
    /// the devices whose advertisements match the filter's patterns.
    ///
    /// Each device is delivered when it starts to match (``Discovery/isNew`` is `true`), again
    /// only after BlueZ lost it and found it anew. Buffering and lifetime are those of
    /// ``ScanStream``; when the stream ends, the monitor is unregistered.
    ///
    /// A passive scan does not outlive `bluetoothd`, as an active scan does not: BlueZ forgets
    /// its monitor, and the stream ends with ``BluetoothError/Code/daemonUnavailable`` when the
    /// daemon leaves the bus (``BluetoothError/Code/adapterRemoved`` when the adapter alone goes,
    /// ``BluetoothError/Code/notAvailable`` when BlueZ releases the monitor first). Start a new
    /// one when the adapter is back.
    ///
    /// The corresponding BlueZ methods are `org.bluez.AdvertisementMonitorManager1.RegisterMonitor`
    /// and `UnregisterMonitor`, with an `or_patterns` monitor; BlueZ calls its `DeviceFound`.
    /// - Parameter filter: The patterns and RSSI thresholds.
    /// - Returns: The matching devices, as BlueZ finds them.
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/notSupported`` when BlueZ offers no
    ///   advertisement monitor on this adapter (BlueZ 5.66 and 5.82 export it only with their
    ///   experimental interfaces, `bluetoothd -E`), ``BluetoothError/Code/invalidArguments`` for a
    ///   filter without patterns or with patterns or thresholds out of range.
    public func passiveScan(_ filter: PassiveScanFilter) async throws -> ScanStream {
        try filter.validate()
        let (stream, continuation) = ScanStream.make(sleep: { [backend] in try await backend.sleep(for: $0) })
        try await backend.passiveScan(filter, into: continuation)
        return stream
    }
}
