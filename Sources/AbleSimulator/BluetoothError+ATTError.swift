import AbleCore

extension BluetoothError {
    /// The error the BlueZ backend gives when a remote GATT server answers `error`: BlueZ turns
    /// ATT errors into D-Bus errors (`create_gatt_dbus_error` in BlueZ's `src/gatt-client.c`),
    /// and the backend maps those.
    static func asBlueZReports(_ error: ATTError) -> BluetoothError {
        let (name, message): (String, String) =
            switch error {
            case .readNotPermitted: ("NotPermitted", "Read not permitted")
            case .writeNotPermitted: ("NotPermitted", "Write not permitted")
            case .insufficientAuthentication, .insufficientEncryption, .insufficientEncryptionKeySize:
                ("NotPermitted", "Not paired")
            case .invalidOffset: ("InvalidArguments", "Invalid offset")
            case .invalidAttributeValueLength: ("InvalidArguments", "Invalid Length")
            case .insufficientAuthorization: ("NotAuthorized", "Operation Not Authorized")
            case .requestNotSupported: ("NotSupported", "Operation is not supported")
            default: ("Failed", "Operation failed with ATT error: 0x" + Hex.format(error.rawValue, digits: 2))
            }
        return BluetoothError.fromBlueZ(name: "org.bluez.Error." + name, message: message)
    }
}
