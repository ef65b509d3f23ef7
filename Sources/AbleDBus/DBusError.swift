/// An error named by D-Bus: an error reply from a peer or the bus, or a local failure given
/// the matching standard name.
///
/// Error replies keep the peer's name and message unchanged (for example
/// `org.bluez.Error.Failed` with `le-connection-abort-by-local`). Local failures use the
/// standard `org.freedesktop.DBus.Error.*` names listed in ``Name``.
public struct DBusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A D-Bus error name such as `org.freedesktop.DBus.Error.UnknownMethod`.
    public struct Name: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
        CustomStringConvertible
    {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }
        public var description: String { rawValue }

        /// A generic failure.
        public static let failed: Name = "org.freedesktop.DBus.Error.Failed"
        /// No reply arrived within the call's timeout, or the callee went away without replying.
        public static let noReply: Name = "org.freedesktop.DBus.Error.NoReply"
        /// A timeout elapsed.
        public static let timeout: Name = "org.freedesktop.DBus.Error.Timeout"
        /// The connection to the bus is closed or was lost.
        public static let disconnected: Name = "org.freedesktop.DBus.Error.Disconnected"
        /// Arguments or values of the wrong type or shape.
        public static let invalidArgs: Name = "org.freedesktop.DBus.Error.InvalidArgs"
        /// A signature that is not valid.
        public static let invalidSignature: Name = "org.freedesktop.DBus.Error.InvalidSignature"
        /// No object at the path.
        public static let unknownObject: Name = "org.freedesktop.DBus.Error.UnknownObject"
        /// The object has no such interface.
        public static let unknownInterface: Name = "org.freedesktop.DBus.Error.UnknownInterface"
        /// The object has no such method.
        public static let unknownMethod: Name = "org.freedesktop.DBus.Error.UnknownMethod"
        /// The object has no such property.
        public static let unknownProperty: Name = "org.freedesktop.DBus.Error.UnknownProperty"
        /// The property cannot be written.
        public static let propertyReadOnly: Name = "org.freedesktop.DBus.Error.PropertyReadOnly"
        /// The caller may not do this.
        public static let accessDenied: Name = "org.freedesktop.DBus.Error.AccessDenied"
        /// The name has no owner.
        public static let nameHasNoOwner: Name = "org.freedesktop.DBus.Error.NameHasNoOwner"
        /// No service owns the destination name.
        public static let serviceUnknown: Name = "org.freedesktop.DBus.Error.ServiceUnknown"
        /// A limit of the bus was reached.
        public static let limitsExceeded: Name = "org.freedesktop.DBus.Error.LimitsExceeded"
        /// Memory ran out.
        public static let noMemory: Name = "org.freedesktop.DBus.Error.NoMemory"
        /// The bus address could not be used.
        public static let badAddress: Name = "org.freedesktop.DBus.Error.BadAddress"
    }

    /// The error's name.
    public var name: Name
    /// The human-readable message that came with it.
    public var message: String

    /// Creates an error with a name and message.
    public init(_ name: Name, _ message: String = "") {
        self.name = name
        self.message = message
    }

    public var description: String { message.isEmpty ? name.rawValue : "\(name.rawValue): \(message)" }

    /// Whether the call timed out (``Name/noReply`` or ``Name/timeout``).
    public var isTimeout: Bool { name == .noReply || name == .timeout }

    /// Whether the connection is gone.
    public var isDisconnected: Bool { name == .disconnected }

    @usableFromInline static func typeMismatch(expected: String, got value: DBusValue) -> DBusError {
        DBusError(.invalidArgs, "expected \(expected), got \(value.signature.rawValue) (\(value))")
    }
}
