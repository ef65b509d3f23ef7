/// A Bluetooth UUID that names a service, characteristic or descriptor.
///
/// Every Bluetooth UUID is a 128-bit value. The Bluetooth SIG assigns 16- and 32-bit aliases
/// inside the Bluetooth Base UUID `00000000-0000-1000-8000-00805F9B34FB` (Core Specification
/// Vol 3, Part B, 2.5.1): `180D` stands for `0000180D-0000-1000-8000-00805F9B34FB`. Equality,
/// hashing and ordering use the 128-bit value, so both spellings are the same UUID.
///
/// ```swift
/// let heartRate: BluetoothUUID = "180D"
/// heartRate == BluetoothUUID("0000180d-0000-1000-8000-00805f9b34fb")  // true
/// heartRate.uuidString  // "0000180d-0000-1000-8000-00805f9b34fb"
/// heartRate.shortForm  // 0x180D
/// ```
public struct BluetoothUUID: Hashable, Comparable, Sendable {
    // Stored as two 64-bit halves: a UInt128 captured by nested async closures crashes
    // Swift 6.3.1 debug builds on Linux (a null job in swift_job_run; 16-byte alignment).
    private let high: UInt64
    private let low: UInt64

    /// The UUID as one 128-bit integer; its most significant byte comes first in ``uuidString``.
    public var uuid128: UInt128 { UInt128(high) << 64 | UInt128(low) }

    /// The Bluetooth Base UUID, `00000000-0000-1000-8000-00805F9B34FB`.
    static let base: UInt128 = 0x0000_0000_0000_1000_8000_0080_5F9B_34FB

    /// The bits of a UUID that a 16- or 32-bit alias leaves at their Base UUID values.
    static let baseMask: UInt128 = (1 << 96) - 1

    /// Creates a UUID from its 128-bit value.
    ///
    /// - Parameter uuid128: The value; its most significant byte is the first in the string form.
    public init(uuid128: UInt128) {
        high = UInt64(truncatingIfNeeded: uuid128 >> 64)
        low = UInt64(truncatingIfNeeded: uuid128)
    }

    /// Creates a UUID from a 16-bit alias of the Bluetooth Base UUID, such as `0x180D`.
    ///
    /// - Parameter uuid16: The SIG-assigned 16-bit value.
    public init(uuid16: UInt16) {
        self.init(uuid32: UInt32(uuid16))
    }

    /// Creates a UUID from a 32-bit alias of the Bluetooth Base UUID.
    ///
    /// - Parameter uuid32: The SIG-assigned 32-bit value.
    public init(uuid32: UInt32) {
        self.init(uuid128: UInt128(uuid32) << 96 | Self.base)
    }

    /// Parses a UUID from text, ignoring case.
    ///
    /// Three forms are accepted: 4 hex digits (`180D`), 8 hex digits (`0000180d`) and the
    /// 36-character 8-4-4-4-12 form (`0000180D-0000-1000-8000-00805F9B34FB`). Short forms are
    /// aliases inside the Bluetooth Base UUID.
    ///
    /// - Parameter string: The text to parse.
    /// - Returns: `nil` if `string` is in none of the three forms.
    public init?(_ string: some StringProtocol) {
        // One pass over the text's bytes in place, allocating nothing: identifiers spelled as text
        // (string-backed enums, BlueZ's `UUID` properties) are parsed on every operation that
        // names them. The pass reads a buffer, not the generic text: through `StringProtocol`,
        // unspecialized in another module, each byte cost a call through a witness table.
        guard
            let parsed = string.utf8.withContiguousStorageIfAvailable(Self.parse)
                ?? Array(string.utf8).withUnsafeBufferPointer(Self.parse)
        else { return nil }
        self = parsed
    }

    /// The UUID that `utf8` spells in one of the forms ``init(_:)`` accepts, or `nil`.
    private static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> BluetoothUUID? {
        guard utf8.count <= 36 else { return nil }
        var value: UInt128 = 0
        var dashes = 0
        for (offset, character) in utf8.enumerated() {
            if character == UInt8(ascii: "-") {
                // Only where the 8-4-4-4-12 form has them.
                switch offset {
                case 8, 13, 18, 23: dashes += 1
                default: return nil
                }
                continue
            }
            guard let digit = Hex.value(of: character) else { return nil }
            value = value << 4 | UInt128(digit)
        }
        switch (utf8.count, dashes) {
        case (4, 0): return BluetoothUUID(uuid16: UInt16(value))
        case (8, 0): return BluetoothUUID(uuid32: UInt32(value))
        case (36, 4): return BluetoothUUID(uuid128: value)
        default: return nil
        }
    }

    /// Creates a UUID from bytes in little-endian order, as advertising data and ATT PDUs carry them.
    ///
    /// - Parameter littleEndianBytes: 2, 4 or 16 bytes, least significant first. Two and four bytes
    ///   are a 16- or 32-bit alias of the Bluetooth Base UUID.
    /// - Returns: `nil` if the byte count is not 2, 4 or 16.
    public init?(littleEndianBytes: some Collection<UInt8>) {
        self.init(bigEndianBytes: littleEndianBytes.reversed())
    }

    /// Creates a UUID from bytes in big-endian order, as the string form writes them.
    ///
    /// - Parameter bigEndianBytes: 2, 4 or 16 bytes, most significant first. Two and four bytes
    ///   are a 16- or 32-bit alias of the Bluetooth Base UUID.
    /// - Returns: `nil` if the byte count is not 2, 4 or 16.
    public init?(bigEndianBytes: some Collection<UInt8>) {
        let value = bigEndianBytes.reduce(UInt128(0)) { $0 << 8 | UInt128($1) }
        switch bigEndianBytes.count {
        case 2, 4: self.init(uuid32: UInt32(value))
        case 16: self.init(uuid128: value)
        default: return nil
        }
    }

    /// The 16- or 32-bit alias, when this UUID lies inside the Bluetooth Base UUID.
    ///
    /// A value that fits 16 bits is a 16-bit UUID; `nil` means only the 128-bit form exists.
    public var shortForm: UInt32? {
        guard uuid128 & Self.baseMask == Self.base else { return nil }
        return UInt32(uuid128 >> 96)
    }

    /// The width in bits of the shortest form of this UUID: 16, 32 or 128.
    public var bitWidth: Int {
        switch shortForm {
        case .some(let short) where short <= UInt16.max: 16
        case .some: 32
        case .none: 128
        }
    }

    /// The canonical text of the full 128-bit UUID, lowercase, in the 8-4-4-4-12 form.
    ///
    /// This is how BlueZ writes UUIDs in its `UUID` and `UUIDs` properties.
    public var uuidString: String {
        let digits = Array(Hex.format(uuid128, digits: 32))
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(digits[$0]) }.joined(separator: "-")
    }

    /// The shortest form of this UUID (see ``bitWidth``) as bytes, most significant first.
    public var bigEndianBytes: [UInt8] {
        let value = shortForm.map { UInt128($0) } ?? uuid128
        return (0..<bitWidth / 8).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }

    /// The shortest form of this UUID (see ``bitWidth``) as bytes, least significant first.
    ///
    /// This is the order advertising data and ATT PDUs use.
    public var littleEndianBytes: [UInt8] {
        bigEndianBytes.reversed()
    }

    public static func < (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool {
        lhs.uuid128 < rhs.uuid128
    }
}

extension BluetoothUUID: CustomStringConvertible {
    /// The canonical 128-bit text, as ``uuidString``.
    public var description: String {
        uuidString
    }
}

extension BluetoothUUID: ExpressibleByStringLiteral {
    /// Creates a UUID from a string literal in one of the forms ``init(_:)`` accepts.
    ///
    /// - Important: A literal that is not a Bluetooth UUID stops the program; use ``init(_:)``
    ///   for text that is not written in the source.
    public init(stringLiteral value: String) {
        guard let uuid = BluetoothUUID(value) else {
            preconditionFailure(
                "\"\(value)\" is not a Bluetooth UUID: expected 4 or 8 hex digits or the 8-4-4-4-12 form"
            )
        }
        self = uuid
    }
}

extension BluetoothUUID: Codable {
    /// Decodes a UUID from a string in one of the forms ``init(_:)`` accepts.
    ///
    /// - Throws: `DecodingError.dataCorrupted` if the string is not a Bluetooth UUID.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let string = try container.decode(String.self)
        guard let uuid = BluetoothUUID(string) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "\"\(string)\" is not a Bluetooth UUID"
            )
        }
        self = uuid
    }

    /// Encodes the UUID as its ``uuidString``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(uuidString)
    }
}

extension BluetoothUUID {
    /// The Generic Access service, `0x1800`.
    public static let genericAccess = BluetoothUUID(uuid16: 0x1800)
    /// The Generic Attribute service, `0x1801`.
    public static let genericAttribute = BluetoothUUID(uuid16: 0x1801)
    /// The Device Information service, `0x180A`.
    public static let deviceInformation = BluetoothUUID(uuid16: 0x180A)
    /// The Heart Rate service, `0x180D`.
    public static let heartRate = BluetoothUUID(uuid16: 0x180D)
    /// The Battery service, `0x180F`.
    public static let batteryService = BluetoothUUID(uuid16: 0x180F)

    /// The Device Name characteristic, `0x2A00`.
    public static let deviceName = BluetoothUUID(uuid16: 0x2A00)
    /// The Appearance characteristic, `0x2A01`.
    public static let appearance = BluetoothUUID(uuid16: 0x2A01)
    /// The Service Changed characteristic, `0x2A05`.
    public static let serviceChanged = BluetoothUUID(uuid16: 0x2A05)
    /// The Battery Level characteristic, `0x2A19`.
    public static let batteryLevel = BluetoothUUID(uuid16: 0x2A19)
    /// The Heart Rate Measurement characteristic, `0x2A37`.
    public static let heartRateMeasurement = BluetoothUUID(uuid16: 0x2A37)
    /// The Body Sensor Location characteristic, `0x2A38`.
    public static let bodySensorLocation = BluetoothUUID(uuid16: 0x2A38)

    /// The Characteristic Extended Properties descriptor, `0x2900`.
    public static let characteristicExtendedProperties = BluetoothUUID(uuid16: 0x2900)
    /// The Characteristic User Description descriptor, `0x2901`.
    public static let characteristicUserDescription = BluetoothUUID(uuid16: 0x2901)
    /// The Client Characteristic Configuration descriptor (CCCD), `0x2902`.
    ///
    /// BlueZ creates and manages this descriptor itself for characteristics that notify or indicate.
    public static let clientCharacteristicConfiguration = BluetoothUUID(uuid16: 0x2902)
    /// The Characteristic Presentation Format descriptor, `0x2904`.
    public static let characteristicPresentationFormat = BluetoothUUID(uuid16: 0x2904)
}
