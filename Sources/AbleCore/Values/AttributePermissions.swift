/// The access and security a local GATT server requires before a client may use an attribute.
///
/// BlueZ enforces these itself, before it calls the server's handlers: a client on a link that
/// is not secure enough gets Insufficient Encryption or Insufficient Authentication and starts
/// pairing. The security levels, weakest first:
///
/// - *Encrypted*: the link is encrypted, with keys from any pairing (BlueZ `encrypt-*`).
/// - *Encrypted and authenticated*: the keys come from pairing with man-in-the-middle
///   protection (BlueZ `encrypt-authenticated-*`).
/// - *Secure*: the keys come from authenticated LE Secure Connections pairing (BlueZ `secure-*`).
///
/// For a characteristic, ``CharacteristicProperties`` grant the access and these permissions add
/// the security (BlueZ receives both as one `Flags` array: `read` with ``readEncrypted`` is
/// `encrypt-read`). For a descriptor, which has no properties, these permissions are everything.
///
/// The raw values of the read and write bits are BlueZ's `BT_ATT_PERM_*` values
/// (`src/shared/att-types.h`); the subscribe and authorization bits are Able's own.
public struct AttributePermissions: OptionSet, Hashable, Sendable {
    /// The permission bits.
    public let rawValue: UInt16

    /// Creates permissions from their raw bits.
    ///
    /// - Parameter rawValue: The permission bits.
    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// Clients may read the attribute (BlueZ `read`).
    public static let readable = AttributePermissions(rawValue: 0x0001)
    /// Clients may write the attribute (BlueZ `write`).
    public static let writable = AttributePermissions(rawValue: 0x0002)
    /// Reads need an encrypted link (BlueZ `encrypt-read`).
    public static let readEncrypted = AttributePermissions(rawValue: 0x0004)
    /// Writes need an encrypted link (BlueZ `encrypt-write`).
    public static let writeEncrypted = AttributePermissions(rawValue: 0x0008)
    /// Reads need a link encrypted with authenticated keys (BlueZ `encrypt-authenticated-read`).
    public static let readEncryptedAuthenticated = AttributePermissions(rawValue: 0x0010)
    /// Writes need a link encrypted with authenticated keys (BlueZ `encrypt-authenticated-write`).
    public static let writeEncryptedAuthenticated = AttributePermissions(rawValue: 0x0020)
    /// Reads need a link secured by LE Secure Connections (BlueZ `secure-read`).
    public static let readSecure = AttributePermissions(rawValue: 0x0100)
    /// Writes need a link secured by LE Secure Connections (BlueZ `secure-write`).
    public static let writeSecure = AttributePermissions(rawValue: 0x0200)
    /// Subscribing to notifications or indications needs an encrypted link
    /// (BlueZ `encrypt-notify`, `encrypt-indicate`).
    public static let subscribeEncrypted = AttributePermissions(rawValue: 0x1000)
    /// Subscribing needs a link encrypted with authenticated keys
    /// (BlueZ `encrypt-authenticated-notify`, `encrypt-authenticated-indicate`).
    public static let subscribeEncryptedAuthenticated = AttributePermissions(rawValue: 0x2000)
    /// Subscribing needs a link secured by LE Secure Connections (BlueZ `secure-notify`, `secure-indicate`).
    public static let subscribeSecure = AttributePermissions(rawValue: 0x4000)
    /// BlueZ asks the server's write handler to authorize each queued write of a Reliable Write or
    /// long write before it is executed (BlueZ `authorize`; the handler sees `prepare-authorize`).
    public static let authorizePreparedWrites = AttributePermissions(rawValue: 0x8000)
}

extension AttributePermissions: CustomStringConvertible {
    /// The names of the permissions in the set, such as `[readable, writeEncrypted]`.
    public var description: String {
        let names: [(AttributePermissions, String)] = [
            (.readable, "readable"), (.writable, "writable"),
            (.readEncrypted, "readEncrypted"), (.writeEncrypted, "writeEncrypted"),
            (.readEncryptedAuthenticated, "readEncryptedAuthenticated"),
            (.writeEncryptedAuthenticated, "writeEncryptedAuthenticated"),
            (.readSecure, "readSecure"), (.writeSecure, "writeSecure"),
            (.subscribeEncrypted, "subscribeEncrypted"),
            (.subscribeEncryptedAuthenticated, "subscribeEncryptedAuthenticated"),
            (.subscribeSecure, "subscribeSecure"), (.authorizePreparedWrites, "authorizePreparedWrites"),
        ]
        return "[" + names.filter { contains($0.0) }.map(\.1).joined(separator: ", ") + "]"
    }
}
