package import CBluetooth

/// The kernel's `struct sockaddr_l2`: where an L2CAP socket binds, listens or connects.
///
/// For LE credit-based channels `l2_bdaddr_type` must be `BDADDR_LE_PUBLIC` or `BDADDR_LE_RANDOM`:
/// the kernel picks LE (rather than BR/EDR) from it, both when binding (the dynamic PSM range
/// `0x0080`–`0x00FF`, the credit-based mode) and when connecting (`hci_connect_le`).
///
/// The values are the kernel's: the BlueZ backend reads and writes them as `BluetoothAddress`
/// and `PSM`.
package struct L2CAPSocketAddress: Equatable, Sendable {
    /// The device address in the kernel's byte order (least significant byte first), or `nil`
    /// for `BDADDR_ANY` (any local adapter).
    package var deviceAddress: [UInt8]?
    /// `BDADDR_LE_PUBLIC` or `BDADDR_LE_RANDOM`.
    package var addressType: UInt8
    /// The PSM; 0 when binding lets the kernel pick one.
    package var psmValue: UInt16

    /// Creates an address.
    ///
    /// - Parameters:
    ///   - deviceAddress: The device address's 6 bytes, least significant first, or `nil` for any
    ///     local adapter.
    ///   - addressType: The kernel's address type byte.
    ///   - psmValue: The PSM.
    package init(deviceAddress: [UInt8]?, addressType: UInt8, psmValue: UInt16) {
        precondition(deviceAddress == nil || deviceAddress?.count == 6, "a device address has 6 bytes")
        self.deviceAddress = deviceAddress
        self.addressType = addressType
        self.psmValue = psmValue
    }

    /// The kernel's `BDADDR_LE_PUBLIC`.
    package static let lePublic = UInt8(ABLE_BDADDR_LE_PUBLIC)
    /// The kernel's `BDADDR_LE_RANDOM`.
    package static let leRandom = UInt8(ABLE_BDADDR_LE_RANDOM)
    /// The size of a `sockaddr_l2`, which `accept(2)` and `getsockname(2)` fill in.
    package static let size = MemoryLayout<sockaddr_l2>.size

    /// The address as the C structure.
    package var cValue: sockaddr_l2 {
        var value = sockaddr_l2()
        value.l2_family = sa_family_t(ABLE_AF_BLUETOOTH)
        value.l2_psm = psmValue.littleEndian
        let bytes = deviceAddress ?? [0, 0, 0, 0, 0, 0]
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
            deviceAddress: littleEndian == [0, 0, 0, 0, 0, 0] ? nil : littleEndian,
            addressType: value.l2_bdaddr_type,
            psmValue: UInt16(littleEndian: value.l2_psm)
        )
    }

    /// Calls `body` with the bytes of the C structure.
    package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        var value = cValue
        return try Swift.withUnsafeBytes(of: &value, body)
    }
}
