/// Why a central's link to a server ended, in Able's words, from what BlueZ 5.83 and later
/// announce with `Device1.Disconnected` (its reason names are in `doc/org.bluez.Device.rst`).
enum BlueZDisconnectionReason {
    /// The reason for BlueZ's reason `name`, seen from the server: "remote" is the central.
    /// A name BlueZ adds later, or `org.bluez.Reason.Unknown`, gives BlueZ's own message.
    static func describe(_ name: String, message: String) -> String {
        switch name {
        case "org.bluez.Reason.Remote": "the central ended the link"
        case "org.bluez.Reason.Local": "this adapter ended the link"
        case "org.bluez.Reason.Timeout": "the link timed out"
        case "org.bluez.Reason.Authentication": "authentication failed"
        case "org.bluez.Reason.Suspend": "this host suspended"
        default: message.isEmpty ? name : message
        }
    }
}
