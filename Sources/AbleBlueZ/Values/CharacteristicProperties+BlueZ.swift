package import AbleCore

/// BlueZ folds a characteristic's properties and the security its server demands into one
/// `Flags` string array on `org.bluez.GattCharacteristic1`; these build it and read it back.
extension CharacteristicProperties {
    /// Reads the properties from BlueZ's `Flags` of a characteristic, as BlueZ does.
    ///
    /// A security flag implies its property, as in BlueZ's `parse_chrc_flags`: `encrypt-read`
    /// means ``read``, `secure-write` means ``write``, `encrypt-notify` means ``notify``. Any
    /// extended property implies ``extendedProperties``. Flags that name no property, such as
    /// `authorize`, and flags this version does not know are ignored; read them with
    /// ``AttributePermissions/init(bluezFlags:)``.
    ///
    /// - Parameter bluezFlags: The `Flags` property of `org.bluez.GattCharacteristic1`.
    package init(bluezFlags: some Sequence<String>) {
        var properties: CharacteristicProperties = []
        for flag in bluezFlags {
            if let (property, _) = Self.names.first(where: { $0.name == flag }) {
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
    package var bluezFlags: [String] { flagNames }

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
    package func bluezFlags(permissions: AttributePermissions) -> [String] {
        var flags: [String] = []
        for (property, flag) in Self.names where contains(property) {
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
