import Able
import AbleDBus

/// The options `bluetoothd` passes with a request to a GATT application's characteristic or
/// descriptor (`ReadValue`, `WriteValue`, `AcquireWrite`, `AcquireNotify`; the `a{sv}` of
/// `doc/org.bluez.GattCharacteristic.rst`), read in one pass over the dictionary as it arrived.
///
/// An option of an unexpected type is ignored, as if absent; options Able does not use (`link`)
/// are skipped. Reading them this way rather than through a `[String: DBusVariant]` saves
/// hashing every key of every request.
struct GATTRequestOptions {
    /// The device that made the request (`device`).
    var device: DBusObjectPath?
    /// The ATT MTU of the request's link (`mtu`).
    var mtu: Int?
    /// Where a read or write starts in the value (`offset`); 0 when absent.
    var offset = 0
    /// The write's type (`type`): `command`, `request` or `reliable`.
    var type: String?
    /// Whether the write is a prepared write that asks for authorization only (`prepare-authorize`).
    var prepareAuthorize = false

    /// Reads the options of argument `index` of `call`.
    ///
    /// - Throws: ``DBusError`` (``DBusError/Name/invalidArgs``) when the argument is missing or is
    ///   not a dictionary of strings to variants.
    init(_ call: DBusMethodCall, argument index: Int) throws(DBusError) {
        guard call.arguments.indices.contains(index),
            case .dictionary(.string, .variant, let entries) = call.arguments[index]
        else { throw DBusError(.invalidArgs, "\(call.member): argument \(index) is not the options (a{sv})") }
        for entry in entries {
            guard case .string(let key) = entry.key else { continue }
            switch (key, entry.value.unwrappingVariant) {
            case ("device", .objectPath(let path)): device = path
            case ("mtu", .uint16(let value)): mtu = Int(value)
            case ("offset", .uint16(let value)): offset = Int(value)
            case ("type", .string(let value)): type = value
            case ("prepare-authorize", .boolean(let value)): prepareAuthorize = value
            default: continue
            }
        }
    }

    /// The central that made the request, from its device's object path.
    var central: Central? {
        guard let device, let address = BluetoothAddress(bluezDevicePath: device) else { return nil }
        return Central(address: address)
    }

    /// The kind of write that `type` names; a Write Request when absent or unknown.
    var writeKind: WriteRequest.Kind {
        switch type {
        case "command": .command
        case "reliable": .reliable
        default: .request
        }
    }
}
