/// What a device advertises about itself: its name, services, manufacturer data and more.
///
/// A scan reports what BlueZ has collected for a device; an advertiser passes one of these to
/// say what to send. ``init(advertisingBytes:)`` and ``advertisingBytes`` convert to and from
/// the raw advertising data format (Core Specification Vol 3, Part C, 11; the data types are in
/// the Core Specification Supplement, Part A).
public struct AdvertisementData: Hashable, Sendable {
    /// The device's name, complete or shortened.
    public var localName: String?

    /// The services the device offers, or the ones it lists as most important.
    public var serviceUUIDs: [BluetoothUUID]

    /// The services the device asks centrals to offer (Service Solicitation), sent as the
    /// advertising data types 0x14, 0x1F and 0x15.
    public var solicitedUUIDs: [BluetoothUUID]

    /// Manufacturer-specific data, keyed by the manufacturer's SIG-assigned company identifier.
    public var manufacturerData: [UInt16: [UInt8]]

    /// Data associated with a service, keyed by the service's UUID.
    public var serviceData: [BluetoothUUID: [UInt8]]

    /// The transmitted power level in dBm, `-127...127`.
    public var txPowerLevel: Int?

    /// The external appearance of the device, a value from the SIG's Appearance assigned numbers.
    public var appearance: UInt16?

    /// The discoverability and BR/EDR support flags, when advertised.
    public var flags: Flags?

    /// The most bytes legacy advertising data or scan response data can hold.
    public static let legacyMaximumLength = 31

    /// Creates advertisement data.
    ///
    /// - Parameters:
    ///   - localName: The device's name.
    ///   - serviceUUIDs: The services to advertise.
    ///   - solicitedUUIDs: The services the device asks centrals to offer.
    ///   - manufacturerData: Manufacturer-specific data, keyed by company identifier.
    ///   - serviceData: Data associated with services, keyed by service UUID.
    ///   - txPowerLevel: The transmitted power level in dBm, `-127...127`.
    ///   - appearance: The external appearance of the device.
    ///   - flags: The discoverability and BR/EDR support flags.
    public init(
        localName: String? = nil,
        serviceUUIDs: [BluetoothUUID] = [],
        solicitedUUIDs: [BluetoothUUID] = [],
        manufacturerData: [UInt16: [UInt8]] = [:],
        serviceData: [BluetoothUUID: [UInt8]] = [:],
        txPowerLevel: Int? = nil,
        appearance: UInt16? = nil,
        flags: Flags? = nil
    ) {
        self.localName = localName
        self.serviceUUIDs = serviceUUIDs
        self.solicitedUUIDs = solicitedUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.txPowerLevel = txPowerLevel
        self.appearance = appearance
        self.flags = flags
    }
}

extension AdvertisementData {
    /// The advertising data types this type reads and writes (Assigned Numbers, "Common Data Types").
    private enum DataType {
        static let flags: UInt8 = 0x01
        static let incompleteUUID16List: UInt8 = 0x02
        static let completeUUID16List: UInt8 = 0x03
        static let incompleteUUID32List: UInt8 = 0x04
        static let completeUUID32List: UInt8 = 0x05
        static let incompleteUUID128List: UInt8 = 0x06
        static let completeUUID128List: UInt8 = 0x07
        static let shortenedLocalName: UInt8 = 0x08
        static let completeLocalName: UInt8 = 0x09
        static let txPowerLevel: UInt8 = 0x0A
        static let solicitedUUID16List: UInt8 = 0x14
        static let solicitedUUID128List: UInt8 = 0x15
        static let solicitedUUID32List: UInt8 = 0x1F
        static let serviceData16: UInt8 = 0x16
        static let appearance: UInt8 = 0x19
        static let serviceData32: UInt8 = 0x20
        static let serviceData128: UInt8 = 0x21
        static let manufacturerData: UInt8 = 0xFF

        /// The UUID width in bytes for each UUID list type.
        static let uuidListWidths: [UInt8: Int] = [
            incompleteUUID16List: 2, completeUUID16List: 2,
            incompleteUUID32List: 4, completeUUID32List: 4,
            incompleteUUID128List: 16, completeUUID128List: 16,
        ]

        /// The UUID width in bytes for each service solicitation type.
        static let solicitedListWidths: [UInt8: Int] = [
            solicitedUUID16List: 2, solicitedUUID32List: 4, solicitedUUID128List: 16,
        ]

        /// The UUID width in bytes for each service data type.
        static let serviceDataWidths: [UInt8: Int] = [serviceData16: 2, serviceData32: 4, serviceData128: 16]
    }

    /// Parses raw advertising or scan response data.
    ///
    /// The data is a sequence of AD structures, each a length byte, a type byte and `length - 1`
    /// bytes of data. A zero length ends the data early, as the specification allows for padding;
    /// whatever follows it is ignored. A complete local name wins over a shortened one; UUIDs from
    /// complete and incomplete lists are merged in order. Unknown types are skipped.
    ///
    /// - Parameter advertisingBytes: The advertising data, at most 31 bytes for legacy advertising
    ///   and up to 1650 for extended advertising.
    /// - Throws: ``BluetoothError`` with code ``BluetoothError/Code/protocolError`` if a structure
    ///   runs past the end of the data or a known type has data of the wrong size.
    public init(advertisingBytes: some Collection<UInt8>) throws {
        self.init()
        let bytes = Array(advertisingBytes)
        var hasCompleteName = false
        var offset = 0
        while offset < bytes.count, bytes[offset] > 0 {
            let end = offset + 1 + Int(bytes[offset])
            guard end <= bytes.count else {
                throw Self.malformed("the structure at offset \(offset) runs \(end - bytes.count) bytes past the end")
            }
            let type = bytes[offset + 1]
            let value = Array(bytes[(offset + 2)..<end])
            if type == DataType.completeLocalName || (type == DataType.shortenedLocalName && !hasCompleteName) {
                localName = String(decoding: value, as: UTF8.self)
                hasCompleteName = type == DataType.completeLocalName
            } else {
                try decode(type: type, value: value)
            }
            offset = end
        }
    }

    /// Decodes one AD structure other than a local name into this value.
    private mutating func decode(type: UInt8, value: [UInt8]) throws {
        let typeName = "type 0x" + Hex.format(type, digits: 2)
        switch type {
        case DataType.flags:
            flags = Flags(rawValue: value.first ?? 0)
        case DataType.txPowerLevel:
            guard value.count == 1 else { throw Self.malformed("TX power level has \(value.count) bytes, not 1") }
            txPowerLevel = Int(Int8(bitPattern: value[0]))
        case DataType.appearance:
            guard value.count == 2 else { throw Self.malformed("appearance has \(value.count) bytes, not 2") }
            appearance = UInt16(value[0]) | UInt16(value[1]) << 8
        case DataType.manufacturerData:
            guard value.count >= 2 else { throw Self.malformed("manufacturer data lacks its company identifier") }
            manufacturerData[UInt16(value[0]) | UInt16(value[1]) << 8] = Array(value[2...])
        default:
            if let width = DataType.uuidListWidths[type] {
                guard value.count % width == 0 else {
                    throw Self.malformed(
                        "UUID list of \(typeName) has \(value.count) bytes, not a multiple of \(width)")
                }
                for start in stride(from: 0, to: value.count, by: width) {
                    let uuid = BluetoothUUID(littleEndianBytes: value[start..<(start + width)])!
                    if !serviceUUIDs.contains(uuid) {
                        serviceUUIDs.append(uuid)
                    }
                }
            } else if let width = DataType.solicitedListWidths[type] {
                guard value.count % width == 0 else {
                    throw Self.malformed(
                        "solicited UUID list of \(typeName) has \(value.count) bytes, not a multiple of \(width)")
                }
                for start in stride(from: 0, to: value.count, by: width) {
                    let uuid = BluetoothUUID(littleEndianBytes: value[start..<(start + width)])!
                    if !solicitedUUIDs.contains(uuid) {
                        solicitedUUIDs.append(uuid)
                    }
                }
            } else if let width = DataType.serviceDataWidths[type] {
                guard value.count >= width else {
                    throw Self.malformed("service data of \(typeName) has \(value.count) bytes, less than its UUID")
                }
                serviceData[BluetoothUUID(littleEndianBytes: value[..<width])!] = Array(value[width...])
            }
        }
    }

    private static func malformed(_ message: String, file: String = #fileID, line: Int = #line) -> BluetoothError {
        BluetoothError(.protocolError, message: "Malformed advertising data: \(message)", file: file, line: line)
    }

    /// The AD structures that encode this data, as type and data, in the order they are sent.
    private var structures: [(type: UInt8, data: [UInt8])] {
        var structures: [(type: UInt8, data: [UInt8])] = []
        if let flags {
            structures.append((DataType.flags, [flags.rawValue]))
        }
        let listTypes = [
            16: DataType.completeUUID16List, 32: DataType.completeUUID32List, 128: DataType.completeUUID128List,
        ]
        for bitWidth in [16, 32, 128] {
            let uuids = serviceUUIDs.filter { $0.bitWidth == bitWidth }
            if !uuids.isEmpty {
                structures.append((listTypes[bitWidth]!, uuids.flatMap(\.littleEndianBytes)))
            }
        }
        let solicitedTypes = [
            16: DataType.solicitedUUID16List, 32: DataType.solicitedUUID32List, 128: DataType.solicitedUUID128List,
        ]
        for bitWidth in [16, 32, 128] {
            let uuids = solicitedUUIDs.filter { $0.bitWidth == bitWidth }
            if !uuids.isEmpty {
                structures.append((solicitedTypes[bitWidth]!, uuids.flatMap(\.littleEndianBytes)))
            }
        }
        let dataTypes = [16: DataType.serviceData16, 32: DataType.serviceData32, 128: DataType.serviceData128]
        for (uuid, data) in serviceData.sorted(by: { $0.key < $1.key }) {
            structures.append((dataTypes[uuid.bitWidth]!, uuid.littleEndianBytes + data))
        }
        if let appearance {
            structures.append((DataType.appearance, [UInt8(truncatingIfNeeded: appearance), UInt8(appearance >> 8)]))
        }
        if let txPowerLevel {
            structures.append((DataType.txPowerLevel, [UInt8(bitPattern: Int8(truncatingIfNeeded: txPowerLevel))]))
        }
        for (company, data) in manufacturerData.sorted(by: { $0.key < $1.key }) {
            structures.append(
                (DataType.manufacturerData, [UInt8(truncatingIfNeeded: company), UInt8(company >> 8)] + data))
        }
        if let localName {
            structures.append((DataType.completeLocalName, Array(localName.utf8)))
        }
        return structures
    }

    /// The number of bytes ``advertisingBytes`` produces.
    ///
    /// Legacy advertising data and scan response data each hold at most
    /// ``legacyMaximumLength`` (31) bytes; extended advertising holds more.
    public var encodedLength: Int {
        structures.reduce(0) { $0 + 2 + $1.data.count }
    }

    /// The data as raw AD structures, in the format ``init(advertisingBytes:)`` parses.
    ///
    /// The structures come in a fixed order: flags, complete service UUID lists (16-, 32- then
    /// 128-bit, each UUID in its shortest form), solicited UUID lists (likewise), service data by UUID, appearance, TX power,
    /// manufacturer data by company identifier, and the complete local name.
    ///
    /// - Throws: ``BluetoothError`` with code ``BluetoothError/Code/valueTooLong`` if one structure
    ///   would hold more than 254 bytes of data, or ``BluetoothError/Code/invalidArguments`` if
    ///   ``txPowerLevel`` is outside `-127...127`.
    public var advertisingBytes: [UInt8] {
        get throws {
            if let txPowerLevel, !(-127...127).contains(txPowerLevel) {
                throw BluetoothError(
                    .invalidArguments, message: "TX power level \(txPowerLevel) dBm is outside -127...127")
            }
            var bytes: [UInt8] = []
            for (type, data) in structures {
                guard data.count <= 254 else {
                    let typeName = "type 0x" + Hex.format(type, digits: 2)
                    let message = "the structure of \(typeName) holds \(data.count) bytes of data; at most 254 fit"
                    throw BluetoothError(.valueTooLong, message: message)
                }
                bytes += [UInt8(data.count + 1), type] + data
            }
            return bytes
        }
    }
}

extension AdvertisementData {
    /// The flags of an advertisement (Core Specification Supplement, Part A, 1.3).
    ///
    /// BlueZ reports them in `org.bluez.Device1.AdvertisingFlags` and sets them itself when it
    /// advertises.
    public struct Flags: OptionSet, Hashable, Sendable {
        /// The flags byte.
        public let rawValue: UInt8

        /// Creates flags from the flags byte.
        ///
        /// - Parameter rawValue: The flags byte.
        public init(rawValue: UInt8) {
            self.rawValue = rawValue
        }

        /// The device is discoverable for a limited time (LE Limited Discoverable Mode).
        public static let limitedDiscoverable = Flags(rawValue: 0x01)
        /// The device is discoverable (LE General Discoverable Mode).
        public static let generalDiscoverable = Flags(rawValue: 0x02)
        /// The device supports LE only (BR/EDR Not Supported).
        public static let bredrNotSupported = Flags(rawValue: 0x04)
        /// The controller runs LE and BR/EDR at once (Simultaneous LE and BR/EDR to Same Device
        /// Capable, Controller).
        public static let simultaneousLEAndBREDRController = Flags(rawValue: 0x08)
        /// The host runs LE and BR/EDR at once (Simultaneous LE and BR/EDR to Same Device
        /// Capable, Host; previously used).
        public static let simultaneousLEAndBREDRHost = Flags(rawValue: 0x10)
    }
}
