extension L2CAPChannel {
    /// How well the link under a channel must be protected before the channel opens: the
    /// kernel's `BT_SECURITY` level.
    ///
    /// A client's level applies when it connects: the kernel pairs or encrypts the link first
    /// (an agent may be asked to confirm). A listener's level applies to every peer that connects
    /// to it: the kernel refuses a peer whose link is not protected well enough with "insufficient
    /// authentication" or "insufficient encryption", and the peer must pair and try again.
    public struct SecurityLevel: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
        /// The kernel's level, `BT_SECURITY_LOW` (1) to `BT_SECURITY_FIPS` (4).
        public let rawValue: UInt8

        /// Creates a level from the kernel's value.
        ///
        /// - Parameter rawValue: The kernel's level, such as `BT_SECURITY_MEDIUM` (2).
        public init(rawValue: UInt8) {
            self.rawValue = rawValue
        }

        /// No protection required (`BT_SECURITY_LOW`), the kernel's default.
        public static let low = SecurityLevel(rawValue: 1)

        /// An encrypted link; a key from unauthenticated ("Just Works") pairing is enough
        /// (`BT_SECURITY_MEDIUM`).
        public static let medium = SecurityLevel(rawValue: 2)

        /// An encrypted link with a key from authenticated pairing, protected against
        /// man-in-the-middle attacks (`BT_SECURITY_HIGH`).
        public static let high = SecurityLevel(rawValue: 3)

        /// An encrypted link with an authenticated LE Secure Connections key of 128 bits
        /// (`BT_SECURITY_FIPS`).
        public static let fips = SecurityLevel(rawValue: 4)

        public static func < (lhs: SecurityLevel, rhs: SecurityLevel) -> Bool {
            lhs.rawValue < rhs.rawValue
        }

        /// The level's name, such as `medium`.
        public var description: String {
            switch self {
            case .low: "low"
            case .medium: "medium"
            case .high: "high"
            case .fips: "fips"
            default: "level \(rawValue)"
            }
        }
    }
}
