/// How a ``NotificationStream`` receives its values from the backend.
///
/// BlueZ offers two ways: `PropertiesChanged` signals of the characteristic's `Value` on the
/// bus (`StartNotify`), or a socket of the characteristic's own (`AcquireNotify`), where each
/// notification is one message and costs no D-Bus message at all. The socket is several times
/// cheaper per value, but it is exclusive (BlueZ grants one per characteristic, and refuses it
/// while any client has started notifications on the bus), it carries notifications only
/// (indications stay on the bus, where BlueZ confirms them), and a value read with
/// ``Peripheral/read(_:offset:)`` does not appear in it. So the bus stays the default, and a
/// stream chooses the socket.
///
/// Streams of one characteristic share one subscription: a stream that joins a characteristic
/// already subscribed receives its values the way the first stream chose.
public struct NotificationDelivery: Sendable, Hashable, CustomStringConvertible {
    package enum Kind: Sendable, Hashable {
        case bus
        case socket
        case automatic
    }

    package let kind: Kind

    /// `PropertiesChanged` signals on the bus (BlueZ `StartNotify`): notifications and
    /// indications, shared with every other client of BlueZ.
    public static let propertiesChanged = NotificationDelivery(kind: .bus)

    /// The characteristic's own socket (BlueZ `AcquireNotify`); notifications only.
    ///
    /// Able reads the socket as values arrive, in its handler on Able's sockets event loop, straight into the
    /// stream's buffer, whose policy is the same as on the bus (see ``NotificationStream``): no
    /// task in between, every message that is ready taken in one wake-up, and a waiting consumer
    /// woken once for them. BlueZ itself drops a notification it cannot write because the socket
    /// is full (about 200 values unread by the kernel's default buffer): that happens only while
    /// this process is not scheduled at all, and such a value is not counted in
    /// ``NotificationStream/droppedCount``.
    ///
    /// Subscribing throws what BlueZ answers when it refuses: ``BluetoothError/Code/notSupported``
    /// when the characteristic does not notify, ``BluetoothError/Code/notPermitted`` when another
    /// client holds the socket, ``BluetoothError/Code/inProgress`` when a client has started
    /// notifications on the bus.
    public static let socket = NotificationDelivery(kind: .socket)

    /// The socket when the characteristic notifies and BlueZ grants it, otherwise (it only
    /// indicates, or BlueZ refuses the socket) `PropertiesChanged` on the bus.
    public static let automatic = NotificationDelivery(kind: .automatic)

    public var description: String {
        switch kind {
        case .bus: "propertiesChanged"
        case .socket: "socket"
        case .automatic: "automatic"
        }
    }
}
