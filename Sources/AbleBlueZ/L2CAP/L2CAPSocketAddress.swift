package import AbleCore
package import CBluetooth

/// The kernel's `struct sockaddr_l2`: where an L2CAP socket binds, listens or connects.
///
/// For LE credit-based channels `l2_bdaddr_type` must be `BDADDR_LE_PUBLIC` or `BDADDR_LE_RANDOM`:
/// the kernel picks LE (rather than BR/EDR) from it, both when binding (the dynamic PSM range
/// `0x0080`–`0x00FF`, the credit-based mode) and when connecting (`hci_connect_le`).
package struct L2CAPSocketAddress: Equatable, Sendable {
    /// The device address, or `nil` for `BDADDR_ANY` (any local adapter).
    package var address: BluetoothAddress?
    /// `BDADDR_LE_PUBLIC` or `BDADDR_LE_RANDOM`.
    package var addressType: UInt8
    /// The PSM; ``PSM/automatic`` (0) when binding lets the kernel pick one.
    package var psm: PSM

    /// Creates an address.
    ///
    /// - Parameters:
    ///   - address: The device address, or `nil` for any local adapter.
    ///   - addressType: The kernel's address type byte.
    ///   - psm: The PSM.
    package init(address: BluetoothAddress?, addressType: UInt8, psm: PSM) {
        self.address = address
        self.addressType = addressType
        self.psm = psm
    }

    /// Creates an LE address.
    ///
    /// - Parameters:
    ///   - address: The device address, or `nil` for any local adapter.
    ///   - type: Whether `address` is public or random.
    ///   - psm: The PSM.
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/invalidArguments`` for an address
    ///   type other than public or random.
    package init(address: BluetoothAddress?, type: BluetoothAddress.AddressType, psm: PSM) throws {
        self.init(address: address, addressType: try Self.kernelType(type), psm: psm)
    }

    /// The kernel's `l2_bdaddr_type` for an LE address type.
    package static func kernelType(_ type: BluetoothAddress.AddressType) throws -> UInt8 {
        switch type {
        case .public: UInt8(ABLE_BDADDR_LE_PUBLIC)
        case .random: UInt8(ABLE_BDADDR_LE_RANDOM)
        default:
            throw BluetoothError(
                .invalidArguments, message: "\(type) is not an LE address type: use public or random")
        }
    }

    /// The Able address type for the kernel's `l2_bdaddr_type`, if it is an LE one.
    package static func addressType(kernelType: UInt8) -> BluetoothAddress.AddressType? {
        switch CInt(kernelType) {
        case ABLE_BDADDR_LE_PUBLIC: .public
        case ABLE_BDADDR_LE_RANDOM: .random
        default: nil
        }
    }

    /// The address as the C structure.
    package var cValue: sockaddr_l2 {
        var value = sockaddr_l2()
        value.l2_family = sa_family_t(ABLE_AF_BLUETOOTH)
        value.l2_psm = psm.rawValue.littleEndian
        let bytes = address?.littleEndianBytes ?? [0, 0, 0, 0, 0, 0]
        value.l2_bdaddr.b = (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5])
        value.l2_cid = 0
        value.l2_bdaddr_type = addressType
        return value
    }

    /// Reads an address the kernel wrote (`accept`, `getsockname`).
    ///
    /// - Parameter bytes: The bytes of a `sockaddr_l2`.
    /// - Returns: `nil` if `bytes` is too short or not of family `AF_BLUETOOTH`.
    package init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= MemoryLayout<sockaddr_l2>.size else { return nil }
        let value = bytes.loadUnaligned(as: sockaddr_l2.self)
        guard CInt(value.l2_family) == ABLE_AF_BLUETOOTH else { return nil }
        let b = value.l2_bdaddr.b
        let littleEndian = [b.0, b.1, b.2, b.3, b.4, b.5]
        self.init(
            address: littleEndian == [0, 0, 0, 0, 0, 0] ? nil : BluetoothAddress(littleEndianBytes: littleEndian),
            addressType: value.l2_bdaddr_type,
            psm: PSM(rawValue: UInt16(littleEndian: value.l2_psm))
        )
    }

    /// Calls `body` with the bytes of the C structure.
    package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        var value = cValue
        return try Swift.withUnsafeBytes(of: &value, body)
    }
}
