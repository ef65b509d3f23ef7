import AbleCore
import AbleDBus

#if canImport(Glibc)
    import Glibc
#endif

/// The options `bluetoothd` passes with a request to a GATT application's characteristic or
/// descriptor (`ReadValue`, `WriteValue`, `AcquireWrite`, `AcquireNotify`; the `a{sv}` of
/// `doc/org.bluez.GattCharacteristic.rst`), read in one pass over the dictionary as it arrived.
///
/// An option of an unexpected type is ignored, as if absent; options Able does not use (`link`)
/// are skipped. Reading them this way rather than through a `[String: DBusVariant]` saves
/// hashing every key of every request.
struct GATTRequestOptions: Equatable {
    /// The central that made the request, from its device's object path (`device`).
    var central: Central?
    /// The ATT MTU of the request's link (`mtu`).
    var mtu: Int?
    /// Where a read or write starts in the value (`offset`); 0 when absent.
    var offset = 0
    /// The kind of write that the write's type (`type`: `command`, `request` or `reliable`)
    /// names; a Write Request when absent or unknown.
    var writeKind = WriteRequest.Kind.request
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
            case ("device", .objectPath(let path)):
                central = BluetoothAddress(bluezDevicePath: path).map { Central(address: $0) }
            case ("mtu", .uint16(let value)): mtu = Int(value)
            case ("offset", .uint16(let value)): offset = Int(value)
            case ("type", .string(let value)): writeKind = Self.writeKind(value)
            case ("prepare-authorize", .boolean(let value)): prepareAuthorize = value
            default: continue
            }
        }
    }

    /// Reads the options of argument `index` of `call` in place, without decoding the call, as
    /// ``init(_:argument:)-(DBusMethodCall,_)`` reads them.
    ///
    /// - Throws: ``DBusError`` (``DBusError/Name/invalidArgs``) when the argument is missing or is
    ///   not a dictionary of strings to variants.
    init(_ call: DBusMethodCallView, argument index: Int) throws(DBusError) {
        var options = GATTRequestOptions()
        try call.forEachEntry(ofDictionary: index) { key, value in
            // As in the decoded form, an option of another type leaves the field as it was.
            if strcmp(key, "device") == 0 {
                if let address = value.withObjectPath(BluetoothAddress.init(bluezDevicePathUTF8:)) {
                    options.central = address.map { Central(address: $0) }
                }
            } else if strcmp(key, "mtu") == 0 {
                if let mtu = value.uint16() { options.mtu = Int(mtu) }
            } else if strcmp(key, "offset") == 0 {
                if let offset = value.uint16() { options.offset = Int(offset) }
            } else if strcmp(key, "type") == 0 {
                if let type = value.string() { options.writeKind = Self.writeKind(type) }
            } else if strcmp(key, "prepare-authorize") == 0 {
                if let prepareAuthorize = value.boolean() { options.prepareAuthorize = prepareAuthorize }
            }
        }
        self = options
    }

    private init() {}

    private static func writeKind(_ type: String) -> WriteRequest.Kind {
        switch type {
        case "command": .command
        case "reliable": .reliable
        default: .request
        }
    }
}
