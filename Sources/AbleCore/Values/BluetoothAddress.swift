/// A 48-bit Bluetooth device address, such as `00:AA:01:01:00:01`.
///
/// The text form writes the most significant byte first, uppercase and colon-separated, as BlueZ
/// does in its `Address` properties. The kernel's `bdaddr_t` stores the same bytes in the
/// opposite order; see ``littleEndianBytes``.
///
/// An address alone does not say whether it is public or random; ``AddressType`` does.
public struct BluetoothAddress: Hashable, Comparable, Sendable {
    /// The address in the low 48 bits, most significant byte first in the text form.
    private let value: UInt64

    private init(value: UInt64) {
        self.value = value
    }

    /// Creates an address from its six bytes, most significant first, as the text form writes them.
    ///
    /// - Parameter bytes: Exactly six bytes.
    /// - Returns: `nil` if `bytes` does not hold exactly six bytes.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 6 else { return nil }
        self.init(value: bytes.reduce(0) { $0 << 8 | UInt64($1) })
    }

    /// Creates an address from its six bytes, least significant first, as the kernel's `bdaddr_t`
    /// and HCI packets store them.
    ///
    /// - Parameter littleEndianBytes: Exactly six bytes.
    /// - Returns: `nil` if `littleEndianBytes` does not hold exactly six bytes.
    public init?(littleEndianBytes: some Collection<UInt8>) {
        self.init(bytes: littleEndianBytes.reversed())
    }

    /// Parses an address from six colon-separated pairs of hex digits, ignoring case.
    ///
    /// - Parameter string: Text such as `00:AA:01:01:00:01`.
    /// - Returns: `nil` if `string` is not in that form.
    public init?(_ string: some StringProtocol) {
        var text = String(string)
        guard let address = text.withUTF8({ BluetoothAddress(utf8: $0, separator: UInt8(ascii: ":")) }) else {
            return nil
        }
        self = address
    }

    /// Parses six pairs of hex digits with `separator` between each two.
    ///
    /// It takes a buffer rather than any collection so that it runs specialized from every module
    /// (a generic one ran through witness tables from AbleBlueZ, a third of the cost of a GATT
    /// request from bluetoothd).
    package init?(utf8: UnsafeBufferPointer<UInt8>, separator: UInt8) {
        // Six pairs of hex digits with a separator between each two: "XX?XX?XX?XX?XX?XX".
        guard utf8.count == 17 else { return nil }
        var value: UInt64 = 0
        for index in 0..<6 {
            let pair = index * 3
            guard let high = Hex.value(of: utf8[pair]), let low = Hex.value(of: utf8[pair + 1]) else { return nil }
            value = value << 8 | UInt64(high << 4 | low)
            guard index < 5 else { break }
            guard utf8[pair + 2] == separator else { return nil }
        }
        self.init(value: value)
    }

    /// The six bytes, most significant first, as the text form writes them.
    public var bytes: [UInt8] {
        (0..<6).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) }
    }

    /// The six bytes, least significant first, as the kernel's `bdaddr_t` and HCI packets store them.
    public var littleEndianBytes: [UInt8] {
        bytes.reversed()
    }

    /// The six bytes as pairs of uppercase hex digits with `separator` between each two.
    package func format(separator: String) -> String {
        bytes.map { Hex.format($0, digits: 2, uppercase: true) }.joined(separator: separator)
    }

    public static func < (lhs: BluetoothAddress, rhs: BluetoothAddress) -> Bool {
        lhs.value < rhs.value
    }
}

extension BluetoothAddress: CustomStringConvertible {
    /// The address as six uppercase colon-separated pairs of hex digits, as BlueZ writes it.
    public var description: String {
        format(separator: ":")
    }
}

extension BluetoothAddress: ExpressibleByStringLiteral {
    /// Creates an address from a string literal such as `"00:AA:01:01:00:01"`.
    ///
    /// - Important: A literal that is not an address stops the program; use ``init(_:)`` for text
    ///   that is not written in the source.
    public init(stringLiteral value: String) {
        guard let address = BluetoothAddress(value) else {
            preconditionFailure(
                "\"\(value)\" is not a Bluetooth address: expected six pairs of hex digits like 00:AA:01:01:00:01"
            )
        }
        self = address
    }
}

extension BluetoothAddress: Codable {
    /// Decodes an address from its colon-separated text.
    ///
    /// - Throws: `DecodingError.dataCorrupted` if the string is not an address.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let string = try container.decode(String.self)
        guard let address = BluetoothAddress(string) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "\"\(string)\" is not a Bluetooth address"
            )
        }
        self = address
    }

    /// Encodes the address as its colon-separated text.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

extension BluetoothAddress {
    /// Whether an LE address is the device's public address or a random one.
    ///
    /// The raw values are those of BlueZ's `org.bluez.Device1.AddressType` property and of the
    /// `AddressType` key in its discovery and connection calls.
    public struct AddressType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The address type's name, as BlueZ spells it in `AddressType`.
        public let rawValue: String

        /// Creates an address type from its name.
        ///
        /// - Parameter rawValue: The name, such as `public` or `random`.
        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        /// An IEEE-assigned public address; BR/EDR devices also report this type.
        public static let `public` = AddressType(rawValue: "public")

        /// A random address, static or private (BlueZ `random`).
        public static let random = AddressType(rawValue: "random")

        /// The address type's name, such as `public`.
        public var description: String {
            rawValue
        }
    }
}
