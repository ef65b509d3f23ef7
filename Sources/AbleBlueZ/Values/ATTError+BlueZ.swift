package import AbleCore

extension ATTError {
    /// The `org.bluez.Error.*` name a BlueZ GATT server handler replies with to send this code,
    /// or `nil` if BlueZ cannot send it.
    ///
    /// BlueZ 5.66 turns the error a `ReadValue` or `WriteValue` handler returns into an ATT code in
    /// `dbus_error_to_att_ecode` (`src/gatt-database.c`):
    ///
    /// | Reply | ATT code |
    /// |---|---|
    /// | `org.bluez.Error.Failed` with the code as its message (`0x80`–`0x9F`) | that application error |
    /// | `org.bluez.Error.Failed` with any other numeric message | Unlikely Error (`0x0E`) |
    /// | `org.bluez.Error.Failed` with a non-numeric message | Application Error `0x80` |
    /// | `org.bluez.Error.NotPermitted` | Read Not Permitted (`0x02`) or Write Not Permitted (`0x03`) |
    /// | `org.bluez.Error.NotAuthorized` | Insufficient Authorization (`0x08`) |
    /// | `org.bluez.Error.NotSupported` | Request Not Supported (`0x06`) |
    /// | `org.bluez.Error.InvalidOffset` | Invalid Offset (`0x07`) |
    /// | `org.bluez.Error.InvalidValueLength` | Invalid Attribute Value Length (`0x0D`) |
    /// | `org.bluez.Error.InProgress` | Procedure Already in Progress (`0xFE`) |
    /// | any other name | Unlikely Error (`0x0E`) |
    ///
    /// BlueZ picks Read or Write Not Permitted by the request it answers, so Read Not Permitted
    /// cannot answer a write, nor Write Not Permitted a read. Every other code (Insufficient
    /// Authentication, Insufficient Encryption, Prepare Queue Full, Write Request Rejected, CCCD
    /// Improperly Configured, Out of Range and the rest) reaches the client as Unlikely Error.
    /// BlueZ checks encryption and authentication itself, before it calls the handler, from the
    /// characteristic's ``AttributePermissions``.
    package var bluezErrorName: String? {
        switch self {
        case .readNotPermitted, .writeNotPermitted: "org.bluez.Error.NotPermitted"
        case .insufficientAuthorization: "org.bluez.Error.NotAuthorized"
        case .requestNotSupported: "org.bluez.Error.NotSupported"
        case .invalidOffset: "org.bluez.Error.InvalidOffset"
        case .invalidAttributeValueLength: "org.bluez.Error.InvalidValueLength"
        case .procedureAlreadyInProgress: "org.bluez.Error.InProgress"
        case _ where isApplicationError: "org.bluez.Error.Failed"
        default: nil
        }
    }

    /// The D-Bus error name and message a BlueZ GATT server handler replies with to send this code.
    ///
    /// Codes with a ``bluezErrorName`` get that name; application errors carry their code as the
    /// message (`0x80`), which is how BlueZ reads them. Codes BlueZ cannot send are replied as
    /// `org.bluez.Error.Failed` with the code as the message: BlueZ 5.66 sends those as Unlikely
    /// Error (`0x0E`) and logs the code it refused, so the intent stays visible in its journal.
    ///
    /// - Returns: The error name and message for the D-Bus error reply.
    package var bluezReply: (name: String, message: String) {
        let code = "0x" + Hex.format(rawValue, digits: 2)
        switch bluezErrorName {
        case .some(let name) where !isApplicationError: return (name, description)
        case .some(let name): return (name, code)
        case .none: return ("org.bluez.Error.Failed", code)
        }
    }
}
