/// An L2CAP Protocol/Service Multiplexer: the port number of an L2CAP connection-oriented channel.
///
/// On LE credit-based channels (Core Specification Vol 3, Part A, 4.22) the SIG assigns the fixed
/// PSMs `0x0001`–`0x007F`; `0x0080`–`0x00FF` are dynamic, taken by applications. A server that
/// listens on ``automatic`` gets a free dynamic PSM from the kernel and publishes it, for example
/// in a characteristic as ``bytes``; its clients read it there and connect to it.
public struct PSM: RawRepresentable, Hashable, Comparable, Sendable {
    /// The PSM value; the kernel's `sockaddr_l2.l2_psm` holds it little-endian.
    public let rawValue: UInt16

    /// Creates a PSM from its value.
    ///
    /// - Parameter rawValue: The PSM value.
    public init(rawValue: UInt16) {
        self.rawValue = rawValue
    }

    /// Creates a PSM from two bytes, least significant first, as protocols and characteristics carry it.
    ///
    /// - Parameter bytes: Exactly two bytes.
    /// - Returns: `nil` if `bytes` does not hold exactly two bytes.
    public init?(bytes: some Collection<UInt8>) {
        let bytes = Array(bytes)
        guard bytes.count == 2 else { return nil }
        self.init(rawValue: UInt16(bytes[0]) | UInt16(bytes[1]) << 8)
    }

    /// Asks the kernel to pick a free dynamic PSM when a server starts listening (PSM `0`).
    ///
    /// Binding an L2CAP socket with PSM `0` makes the kernel assign one from the dynamic range;
    /// the listening channel reports the PSM it got.
    public static let automatic = PSM(rawValue: 0x0000)

    /// The Internet Protocol Support Profile (IPSP, 6LoWPAN over BLE), `0x0023`.
    public static let ipsp = PSM(rawValue: 0x0023)

    /// Enhanced ATT bearers (EATT), `0x0027`; BlueZ's `BT_ATT_EATT_PSM`.
    public static let eatt = PSM(rawValue: 0x0027)

    /// The range of LE PSMs the Bluetooth SIG assigns.
    public static let fixedRange: ClosedRange<UInt16> = 0x0001...0x007F

    /// The range of LE PSMs applications use.
    public static let dynamicRange: ClosedRange<UInt16> = 0x0080...0x00FF

    /// Whether the PSM is SIG-assigned, `0x0001`–`0x007F`.
    public var isFixed: Bool {
        Self.fixedRange.contains(rawValue)
    }

    /// Whether the PSM is in the LE dynamic range, `0x0080`–`0x00FF`.
    public var isDynamic: Bool {
        Self.dynamicRange.contains(rawValue)
    }

    /// The PSM as two bytes, least significant first, as protocols and characteristics carry it.
    public var bytes: [UInt8] {
        [UInt8(truncatingIfNeeded: rawValue), UInt8(truncatingIfNeeded: rawValue >> 8)]
    }

    public static func < (lhs: PSM, rhs: PSM) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}

extension PSM: CustomStringConvertible {
    /// The PSM in hex, such as `PSM 0x0080`, or `PSM automatic` for ``automatic``.
    public var description: String {
        self == .automatic ? "PSM automatic" : "PSM 0x" + Hex.format(rawValue, digits: 4, uppercase: true)
    }
}
