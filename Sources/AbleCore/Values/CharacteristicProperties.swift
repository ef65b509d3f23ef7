/// What a GATT characteristic lets a client do with its value: read it, write it, subscribe to it.
///
/// The low byte is the Characteristic Properties field of the characteristic declaration (Core
/// Specification Vol 3, Part G, 3.3.1.1); the next byte holds the Characteristic Extended
/// Properties bits (Vol 3, Part G, 3.3.3.1), so ``reliableWrite`` is `0x0100`.
///
/// Properties say what a client may attempt; ``AttributePermissions`` say what security the
/// server demands for it.
public struct CharacteristicProperties: OptionSet, Hashable, Sendable {
    /// The properties byte in the low eight bits, the extended properties bits above it.
    public let rawValue: UInt16

    /// Creates properties from their raw bits.
    ///
    /// - Parameter rawValue: The properties byte in the low eight bits, the extended properties
    ///   bits shifted left by eight.
    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// The value may be broadcast in advertising data (BlueZ `broadcast`).
    public static let broadcast = CharacteristicProperties(rawValue: 0x01)
    /// The value may be read (BlueZ `read`).
    public static let read = CharacteristicProperties(rawValue: 0x02)
    /// The value may be written with a Write Command, which gets no response
    /// (BlueZ `write-without-response`).
    public static let writeWithoutResponse = CharacteristicProperties(rawValue: 0x04)
    /// The value may be written with a Write Request, which the server answers (BlueZ `write`).
    public static let write = CharacteristicProperties(rawValue: 0x08)
    /// The server may notify the value, unacknowledged (BlueZ `notify`).
    public static let notify = CharacteristicProperties(rawValue: 0x10)
    /// The server may indicate the value, which the client acknowledges (BlueZ `indicate`).
    public static let indicate = CharacteristicProperties(rawValue: 0x20)
    /// The value may be written with a Signed Write Command (BlueZ `authenticated-signed-writes`).
    public static let authenticatedSignedWrites = CharacteristicProperties(rawValue: 0x40)
    /// The characteristic has a Characteristic Extended Properties descriptor
    /// (BlueZ `extended-properties`).
    public static let extendedProperties = CharacteristicProperties(rawValue: 0x80)
    /// The value may be written with the Reliable Write procedure, an extended property
    /// (BlueZ `reliable-write`).
    public static let reliableWrite = CharacteristicProperties(rawValue: 0x0100)
    /// The Characteristic User Description descriptor may be written, an extended property
    /// (BlueZ `writable-auxiliaries`).
    public static let writableAuxiliaries = CharacteristicProperties(rawValue: 0x0200)

    /// Every property that lets a client write the value.
    package static let writes: CharacteristicProperties = [
        .write, .writeWithoutResponse, .authenticatedSignedWrites, .reliableWrite,
    ]

    /// Each property with its name, in the order of their bits: the names BlueZ uses for its
    /// `Flags` too.
    package static let names: [(property: CharacteristicProperties, name: String)] = [
        (.broadcast, "broadcast"),
        (.read, "read"),
        (.writeWithoutResponse, "write-without-response"),
        (.write, "write"),
        (.notify, "notify"),
        (.indicate, "indicate"),
        (.authenticatedSignedWrites, "authenticated-signed-writes"),
        (.extendedProperties, "extended-properties"),
        (.reliableWrite, "reliable-write"),
        (.writableAuxiliaries, "writable-auxiliaries"),
    ]
}

extension CharacteristicProperties: CustomStringConvertible {
    /// The properties' names, such as `[read, notify]`.
    public var description: String {
        "[" + flagNames.joined(separator: ", ") + "]"
    }

    /// The names of the properties in the set, in the order of their bits.
    package var flagNames: [String] {
        Self.names.filter { contains($0.property) }.map(\.name)
    }
}
