/// What a GATT characteristic lets a client do with its value: read it, write it, subscribe to it.
///
/// The low byte is the Characteristic Properties field of the characteristic declaration (Core
/// Specification Vol 3, Part G, 3.3.1.1); the next byte holds the Characteristic Extended
/// Properties bits (Vol 3, Part G, 3.3.3.1), so ``reliableWrite`` is `0x0100`.
///
/// Properties say what a client may attempt; ``AttributePermissions`` say what security the
/// server demands for it. BlueZ folds both into one `Flags` string array on
/// `org.bluez.GattCharacteristic1`; ``bluezFlags(permissions:)`` builds it and
/// ``init(bluezFlags:)`` reads the properties back.
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
    static let writes: CharacteristicProperties = [
        .write, .writeWithoutResponse, .authenticatedSignedWrites, .reliableWrite,
    ]

    /// Each property with its flag in BlueZ's `Flags` array, in the order BlueZ lists them.
    static let bluezNames: [(property: CharacteristicProperties, flag: String)] = [
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

    /// Reads the properties from BlueZ's `Flags` of a characteristic, as BlueZ does.
    ///
    /// A security flag implies its property, as in BlueZ's `parse_chrc_flags`: `encrypt-read`
    /// means ``read``, `secure-write` means ``write``, `encrypt-notify` means ``notify``. Any
    /// extended property implies ``extendedProperties``. Flags that name no property, such as
    /// `authorize`, and flags this version does not know are ignored; read them with
    /// ``AttributePermissions/init(bluezFlags:)``.
    ///
    /// - Parameter bluezFlags: The `Flags` property of `org.bluez.GattCharacteristic1`.
    public init(bluezFlags: some Sequence<String>) {
        var properties: CharacteristicProperties = []
        for flag in bluezFlags {
            if let (property, _) = Self.bluezNames.first(where: { $0.flag == flag }) {
                properties.insert(property)
            } else if let security = AttributePermissions.securityFlags.first(where: { $0.flag == flag }) {
                properties.insert(security.property)
            }
        }
        if !properties.isDisjoint(with: [.reliableWrite, .writableAuxiliaries]) {
            properties.insert(.extendedProperties)
        }
        self = properties
    }

    /// The properties as BlueZ lists them in the `Flags` of a remote characteristic.
    public var bluezFlags: [String] {
        Self.bluezNames.filter { contains($0.property) }.map(\.flag)
    }

    /// The `Flags` BlueZ needs to serve a local characteristic with these properties and permissions.
    ///
    /// Each property gives its flag; a security requirement in `permissions` replaces the flag of
    /// the access it protects, as BlueZ's flags carry both at once: ``read`` with
    /// ``AttributePermissions/readEncrypted`` gives `encrypt-read`, ``notify`` with
    /// ``AttributePermissions/subscribeSecure`` gives `secure-notify`. Write requirements apply
    /// when any write property is present; BlueZ then also declares ``write``, because it has no
    /// flag that secures a write without it. Read requirements apply only with ``read``, so they
    /// never make a value readable. ``AttributePermissions/readable`` and
    /// ``AttributePermissions/writable`` add nothing: the properties already grant access.
    ///
    /// - Parameter permissions: The security the server requires; ``AttributePermissions/authorizePreparedWrites``
    ///   adds `authorize`.
    /// - Returns: Flags for the `Flags` property of an exported `org.bluez.GattCharacteristic1`.
    public func bluezFlags(permissions: AttributePermissions) -> [String] {
        var flags: [String] = []
        for (property, flag) in Self.bluezNames where contains(property) {
            let guarded = AttributePermissions.securityFlags.filter {
                $0.property == property && permissions.contains($0.permission)
            }
            flags += guarded.isEmpty ? [flag] : guarded.map(\.flag)
        }
        if !contains(.write) && !isDisjoint(with: Self.writes) {
            flags += AttributePermissions.securityFlags.filter {
                $0.property == .write && permissions.contains($0.permission)
            }.map(\.flag)
        }
        if permissions.contains(.authorizePreparedWrites) {
            flags.append("authorize")
        }
        return flags
    }
}

extension CharacteristicProperties: CustomStringConvertible {
    /// The properties as BlueZ names them, such as `[read, notify]`.
    public var description: String {
        "[" + bluezFlags.joined(separator: ", ") + "]"
    }
}
