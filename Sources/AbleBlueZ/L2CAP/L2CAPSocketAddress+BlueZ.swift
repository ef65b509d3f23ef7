package import AbleCore
package import AbleIO

// The kernel's L2CAP socket address (AbleIO) in the public API's values.
extension L2CAPSocketAddress {
    /// The device address, or `nil` for `BDADDR_ANY` (any local adapter).
    package var address: BluetoothAddress? {
        get { deviceAddress.flatMap { BluetoothAddress(littleEndianBytes: $0) } }
        set { deviceAddress = newValue?.littleEndianBytes }
    }

    /// The PSM; ``PSM/automatic`` (0) when binding lets the kernel pick one.
    package var psm: PSM {
        get { PSM(rawValue: psmValue) }
        set { psmValue = newValue.rawValue }
    }

    /// Creates an address.
    ///
    /// - Parameters:
    ///   - address: The device address, or `nil` for any local adapter.
    ///   - addressType: The kernel's address type byte.
    ///   - psm: The PSM.
    package init(address: BluetoothAddress?, addressType: UInt8, psm: PSM) {
        self.init(deviceAddress: address?.littleEndianBytes, addressType: addressType, psmValue: psm.rawValue)
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
        case .public: lePublic
        case .random: leRandom
        default:
            throw BluetoothError(
                .invalidArguments, message: "\(type) is not an LE address type: use public or random")
        }
    }

    /// The Able address type for the kernel's `l2_bdaddr_type`, if it is an LE one.
    package static func addressType(kernelType: UInt8) -> BluetoothAddress.AddressType? {
        switch kernelType {
        case lePublic: .public
        case leRandom: .random
        default: nil
        }
    }
}
