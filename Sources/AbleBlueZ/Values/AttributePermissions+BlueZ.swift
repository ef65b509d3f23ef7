package import AbleCore

/// BlueZ's `Flags` strings for the security of characteristics and descriptors.
extension AttributePermissions {
    /// Each security requirement, the property it protects and the flag BlueZ spells it with.
    static let securityFlags: [(permission: AttributePermissions, property: CharacteristicProperties, flag: String)] =
        [
            (.readEncrypted, .read, "encrypt-read"),
            (.readEncryptedAuthenticated, .read, "encrypt-authenticated-read"),
            (.readSecure, .read, "secure-read"),
            (.writeEncrypted, .write, "encrypt-write"),
            (.writeEncryptedAuthenticated, .write, "encrypt-authenticated-write"),
            (.writeSecure, .write, "secure-write"),
            (.subscribeEncrypted, .notify, "encrypt-notify"),
            (.subscribeEncryptedAuthenticated, .notify, "encrypt-authenticated-notify"),
            (.subscribeSecure, .notify, "secure-notify"),
            (.subscribeEncrypted, .indicate, "encrypt-indicate"),
            (.subscribeEncryptedAuthenticated, .indicate, "encrypt-authenticated-indicate"),
            (.subscribeSecure, .indicate, "secure-indicate"),
        ]

    /// Reads the permissions from BlueZ's `Flags` of a characteristic or descriptor, as BlueZ does.
    ///
    /// As in BlueZ's `parse_chrc_flags` and `parse_desc_flags`, `read` gives ``readable``; `write`,
    /// `write-without-response`, `authenticated-signed-writes` and `reliable-write` give
    /// ``writable``; a read or write security flag gives its requirement and the access it
    /// protects (`encrypt-read` gives ``readEncrypted`` and ``readable``). Flags that carry no
    /// permission, such as `notify`, and flags this version does not know are ignored.
    ///
    /// - Parameter bluezFlags: The `Flags` property of `org.bluez.GattCharacteristic1` or
    ///   `org.bluez.GattDescriptor1`.
    package init(bluezFlags: some Sequence<String>) {
        var permissions: AttributePermissions = []
        for flag in bluezFlags {
            switch flag {
            case "read":
                permissions.insert(.readable)
            case "write", "write-without-response", "authenticated-signed-writes", "reliable-write":
                permissions.insert(.writable)
            case "authorize":
                permissions.insert(.authorizePreparedWrites)
            default:
                guard let security = Self.securityFlags.first(where: { $0.flag == flag }) else { continue }
                permissions.insert(security.permission)
                if security.property == .read {
                    permissions.insert(.readable)
                } else if security.property == .write {
                    permissions.insert(.writable)
                }
            }
        }
        self = permissions
    }

    /// The `Flags` BlueZ needs to serve a local descriptor with these permissions.
    ///
    /// A read or write requirement replaces the plain flag, as BlueZ's flags carry access and
    /// security at once: `[.readable, .readEncrypted]` gives `encrypt-read`, and so does
    /// `.readEncrypted` alone, because a requirement implies the access it protects. The
    /// subscribe requirements do not apply to descriptors and are left out.
    ///
    /// - Returns: Flags for the `Flags` property of an exported `org.bluez.GattDescriptor1`.
    package var bluezDescriptorFlags: [String] {
        var flags: [String] = []
        for (access, property, plainFlag) in [
            (Self.readable, CharacteristicProperties.read, "read"), (.writable, .write, "write"),
        ] {
            let guarded = Self.securityFlags.filter { $0.property == property && contains($0.permission) }
            if !guarded.isEmpty {
                flags += guarded.map(\.flag)
            } else if contains(access) {
                flags.append(plainFlag)
            }
        }
        if contains(.authorizePreparedWrites) {
            flags.append("authorize")
        }
        return flags
    }
}
