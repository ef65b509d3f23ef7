package import AbleIO
import CDBus

#if canImport(Glibc)
    import Glibc
#endif

/// A received signal read in place, without decoding its arguments into ``DBusValue``s: for
/// hot paths that need one thing from each signal (Able's notification streams take the bytes
/// of a characteristic's `Value`).
///
/// A view is valid only during the call of the handler it is given to (the message is freed
/// after dispatch); copy out what you need.
package struct DBusSignalView {
    let message: OpaquePointer
    /// The unique bus name of the sender.
    package let sender: String
    /// The object that emitted the signal.
    package let path: String
    /// The signal's interface.
    package let interface: String
    /// The signal's name.
    package let member: String

    /// Decodes every argument, as a ``DBusSignal``.
    package func decoded() throws(DBusError) -> DBusSignal {
        var strings: RecentStrings?
        return try decoded(strings: &strings)
    }

    /// Decodes every argument, as a ``DBusSignal``, taking long strings from `strings` when
    /// they are recent ones.
    func decoded(strings: inout RecentStrings?) throws(DBusError) -> DBusSignal {
        DBusSignal(
            sender: sender, path: DBusObjectPath(unchecked: path), interface: interface, member: member,
            arguments: try MessageCoding.decodeArguments(of: message, strings: &strings))
    }

    /// For a `PropertiesChanged(s interface, a{sv} changed, as invalidated)` signal of
    /// `interface`, read in place in one walk: the bytes of the changed property `name` (`nil`
    /// when it is not among the changes), and whether nothing else changed. `nil` when the
    /// signal is not a `PropertiesChanged` of `interface`.
    ///
    /// - Throws: ``DBusError`` (``DBusError/Name/invalidArgs``) when the signal does not have
    ///   that shape or the property is not a byte array (`ay`).
    package func changedByteArray(
        named name: String, of interface: String
    ) throws(DBusError) -> (bytes: [UInt8]?, isOnlyChange: Bool)? {
        var storage = ByteStorage()
        return try changedByteArray(named: name, of: interface, storage: &storage)
    }

    /// ``changedByteArray(named:of:)``, copying the bytes into `storage`'s array if it has room:
    /// for a receiver of every notified value, which recycles the arrays its takers did not keep.
    package func changedByteArray(
        named name: String, of interface: String, storage: inout ByteStorage
    ) throws(DBusError) -> (bytes: [UInt8]?, isOnlyChange: Bool)? {
        var bytes: [UInt8]?
        var isOnlyChange = true
        let walked = try forEachChange(of: interface) { (key, value) throws(DBusError) in
            if name.withCString({ strcmp($0, key) == 0 }) {
                guard let value = value.bytes(in: &storage) else {
                    throw DBusError(.invalidArgs, "PropertiesChanged: \(name) is not a byte array (ay)")
                }
                bytes = value
            } else {
                isOnlyChange = false
            }
            return true
        }
        return walked == nil ? nil : (bytes, isOnlyChange)
    }

    /// Whether this is a `PropertiesChanged(s, a{sv}, as)` signal of `interface` whose changed
    /// properties are all named `name` (a notified characteristic value, say), read in place.
    package func changesOnly(property name: String, of interface: String) -> Bool {
        let walked = try? forEachChange(of: interface) { key, _ in name.withCString { strcmp($0, key) == 0 } }
        return walked == true
    }

    /// Walks the changed properties of a `PropertiesChanged(s, a{sv}, as)` signal of `interface`,
    /// handing `visit` each one's name and a reader of its value, while `visit` returns `true`.
    /// Returns whether it visited them all; `nil` when the signal is not a `PropertiesChanged` of
    /// `interface`.
    ///
    /// - Throws: ``DBusError`` (``DBusError/Name/invalidArgs``) when the signal does not have
    ///   that shape, or what `visit` throws.
    private func forEachChange(
        of interface: String,
        _ visit: (_ name: UnsafePointer<CChar>, _ value: inout DBusVariantReader) throws(DBusError) -> Bool
    ) throws(DBusError) -> Bool? {
        guard member == "PropertiesChanged", self.interface == "org.freedesktop.DBus.Properties" else { return nil }
        // Made only when thrown: the message's text costs an allocation, and this runs for every
        // notified value. It names no property of `self`: capturing one would copy the view, and
        // retain its four strings, for every value.
        func malformed() -> DBusError { DBusError(.invalidArgs, "the signal is not PropertiesChanged(s, a{sv}, as)") }
        var arguments = DBusMessageIter()
        var changedInterface: UnsafePointer<CChar>?
        guard dbus_message_iter_init(message, &arguments) != 0,
            dbus_message_iter_get_arg_type(&arguments) == ABLE_DBUS_TYPE_STRING
        else { throw malformed() }
        dbus_message_iter_get_basic(&arguments, &changedInterface)
        guard let changedInterface, interface.withCString({ strcmp($0, changedInterface) == 0 }) else { return nil }
        guard dbus_message_iter_next(&arguments) != 0 else { throw malformed() }
        return try DBusVariantReader.forEachEntry(of: &arguments, malformed: malformed(), visit)
    }

    /// Argument `index` when it is a string, read without decoding the others.
    func stringArgument(_ index: Int, interning strings: inout RecentStrings) -> String? {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(message, &iterator) != 0 else { return nil }
        for _ in 0..<index where dbus_message_iter_next(&iterator) == 0 { return nil }
        guard dbus_message_iter_get_arg_type(&iterator) == ABLE_DBUS_TYPE_STRING else { return nil }
        var pointer: UnsafePointer<CChar>?
        dbus_message_iter_get_basic(&iterator, &pointer)
        return pointer.map { strings.string($0) }
    }
}
