package import AbleCore

extension BluetoothError {
    /// The error a central sees when a remote GATT server answers a request with `error`: the
    /// same code, ATT error and text as the BlueZ backend gives, whose GATT client turns some ATT
    /// errors into errors of their own (`create_gatt_dbus_error` in BlueZ's `src/gatt-client.c`).
    ///
    /// - Parameter error: The ATT error the server answered with.
    /// - Returns: The error the request throws.
    package static func asGATTClientReports(_ error: ATTError) -> BluetoothError {
        switch error {
        case .readNotPermitted:
            BluetoothError(.notPermitted, message: "Read not permitted", attError: error)
        case .writeNotPermitted:
            BluetoothError(.notPermitted, message: "Write not permitted", attError: error)
        case .insufficientAuthentication, .insufficientEncryption, .insufficientEncryptionKeySize:
            // BlueZ says only that the link is not paired, without the ATT code.
            BluetoothError(.notPermitted, message: "Not paired")
        case .invalidOffset:
            BluetoothError(.invalidOffset, message: "Invalid offset", attError: error)
        case .invalidAttributeValueLength:
            BluetoothError(.invalidValueLength, message: "Invalid Length", attError: error)
        case .insufficientAuthorization:
            BluetoothError(.notAuthorized, message: "Operation Not Authorized")
        case .requestNotSupported:
            BluetoothError(.notSupported, message: "Operation is not supported")
        default:
            BluetoothError(
                .attError, message: "Operation failed with ATT error: 0x" + Hex.format(error.rawValue, digits: 2),
                attError: error)
        }
    }
}
