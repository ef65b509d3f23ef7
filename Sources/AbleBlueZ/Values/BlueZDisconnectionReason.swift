import AbleCore

/// Why a link ended, in Able's words, from what BlueZ 5.83 and later announce with
/// `Device1.Disconnected` (its reason names are in `doc/org.bluez.Device.rst`).
enum BlueZDisconnectionReason {
    /// The reason for BlueZ's reason `name`, where `peer` names the other side ("the central" for
    /// a server, "the peripheral" for a central). A name BlueZ adds later, or
    /// `org.bluez.Reason.Unknown`, gives BlueZ's own message.
    static func describe(_ name: String, message: String, peer: String) -> String {
        switch name {
        case "org.bluez.Reason.Remote": "\(peer) ended the link"
        case "org.bluez.Reason.Local": "this adapter ended the link"
        case "org.bluez.Reason.Timeout": "the link timed out"
        case "org.bluez.Reason.Authentication": "authentication failed"
        case "org.bluez.Reason.Suspend": "this host suspended"
        default: message.isEmpty ? name : message
        }
    }

    /// The error that says why a link ended, for BlueZ's reason `name`: its code tells the
    /// reasons apart (an unknown one is ``BluetoothError/Code/disconnected``), its message is
    /// ``describe(_:message:peer:)``'s, and its error name is BlueZ's reason name.
    static func error(_ name: String, message: String, peer: String) -> BluetoothError {
        let code: BluetoothError.Code =
            switch name {
            case "org.bluez.Reason.Remote": .peerDisconnected
            case "org.bluez.Reason.Local": .locallyDisconnected
            case "org.bluez.Reason.Timeout": .linkTimeout
            case "org.bluez.Reason.Authentication": .authenticationFailed
            default: .disconnected
            }
        return BluetoothError(code, message: describe(name, message: message, peer: peer), errorName: name)
    }
}
