package import AbleIO
import CDBus

#if canImport(Glibc)
    import Glibc
#endif

/// A received method call read in place, without decoding its arguments into ``DBusValue``s:
/// for handlers on hot paths that need a few things from each call (Able's GATT server takes the
/// device, offset and MTU from the options of every `ReadValue`). Declared with
/// ``DBusMethod/immediateInPlace(_:in:out:handler:)``.
///
/// A view is valid only during the call of the handler it is given to (the message is freed
/// after dispatch); copy out what you need. The call's arguments match the method's input
/// signature: the connection checked it before the handler runs.
package struct DBusMethodCallView {
    let message: OpaquePointer
    /// The caller's unique bus name.
    package let sender: String
    /// The called object's path.
    package let path: DBusObjectPath
    /// The interface named in the call.
    package let interface: String
    /// The method's name.
    package let member: String

    /// Makes a method call message with `arguments` and hands `body` a view of it: for testing
    /// in-place handlers without a bus.
    ///
    /// - Throws: ``DBusError`` when an argument cannot be encoded, or what `body` throws.
    package static func withCall<T>(
        sender: String = "", path: DBusObjectPath, interface: String, member: String, arguments: [DBusValue],
        _ body: (DBusMethodCallView) throws -> T
    ) throws -> T {
        guard let message = dbus_message_new_method_call(nil, path.rawValue, interface, member) else {
            throw DBusError(.noMemory, "libdbus could not make a method call")
        }
        defer { dbus_message_unref(message) }
        try MessageCoding.append(arguments, to: message)
        return try body(
            DBusMethodCallView(message: message, sender: sender, path: path, interface: interface, member: member))
    }

    /// Hands `visit` the key of each entry of argument `index`, a dictionary of strings to
    /// variants (`a{sv}`, such as BlueZ's options), and a reader of its value (the innermost, when
    /// the variant holds another variant, as ``DBusValue/unwrappingVariant`` gives it).
    ///
    /// - Throws: ``DBusError`` (``DBusError/Name/invalidArgs``) when argument `index` is missing
    ///   or is not `a{sv}`, or what `visit` throws.
    package func forEachEntry(
        ofDictionary index: Int,
        _ visit: (_ key: UnsafePointer<CChar>, _ value: inout DBusVariantReader) throws(DBusError) -> Void
    ) throws(DBusError) {
        var dictionary = try argument(index)
        // Made only when thrown: the message's text costs an allocation, and this runs for every
        // GATT request's options.
        func malformed() -> DBusError { DBusError(.invalidArgs, "\(member): argument \(index) is not a{sv}") }
        var isEmpty = true
        _ = try DBusVariantReader.forEachEntry(of: &dictionary, malformed: malformed()) {
            (key, value) throws(DBusError) in
            isEmpty = false
            // A variant in a variant is read as its innermost value, as `unwrappingVariant` reads it.
            while dbus_message_iter_get_arg_type(&value.iterator) == ABLE_DBUS_TYPE_VARIANT {
                var inner = DBusMessageIter()
                dbus_message_iter_recurse(&value.iterator, &inner)
                value.iterator = inner
            }
            try visit(key, &value)
            return true
        }
        // An empty dictionary has no entry to check: its type is in the signature.
        guard !isEmpty || isStringVariantDictionary(index) else { throw malformed() }
    }

    /// Argument `index`, a byte array (`ay`).
    ///
    /// - Throws: ``DBusError`` (``DBusError/Name/invalidArgs``) when it is missing or is not `ay`.
    package func bytes(argument index: Int) throws(DBusError) -> [UInt8] {
        var array = try argument(index)
        guard dbus_message_iter_get_arg_type(&array) == ABLE_DBUS_TYPE_ARRAY,
            dbus_message_iter_get_element_type(&array) == ABLE_DBUS_TYPE_BYTE
        else { throw DBusError(.invalidArgs, "\(member): argument \(index) is not ay") }
        return DBusVariantReader.fixedBytes(in: &array)
    }

    /// Whether the message's signature gives argument `index` the type `a{sv}`, read without
    /// copying the signature.
    private func isStringVariantDictionary(_ index: Int) -> Bool {
        guard let signature = dbus_message_get_signature(message) else { return false }
        var type = DBusSignatureIter()
        dbus_signature_iter_init(&type, signature)
        for _ in 0..<index where dbus_signature_iter_next(&type) == 0 { return false }
        guard dbus_signature_iter_get_current_type(&type) == ABLE_DBUS_TYPE_ARRAY,
            dbus_signature_iter_get_element_type(&type) == ABLE_DBUS_TYPE_DICT_ENTRY
        else { return false }
        var entry = DBusSignatureIter()
        var element = DBusSignatureIter()
        dbus_signature_iter_recurse(&type, &element)
        dbus_signature_iter_recurse(&element, &entry)
        return dbus_signature_iter_get_current_type(&entry) == ABLE_DBUS_TYPE_STRING
            && dbus_signature_iter_next(&entry) != 0
            && dbus_signature_iter_get_current_type(&entry) == ABLE_DBUS_TYPE_VARIANT
    }

    /// An iterator at argument `index`.
    private func argument(_ index: Int) throws(DBusError) -> DBusMessageIter {
        var iterator = DBusMessageIter()
        guard dbus_message_iter_init(message, &iterator) != 0 else {
            throw DBusError(.invalidArgs, "\(member): missing argument \(index)")
        }
        for _ in 0..<index where dbus_message_iter_next(&iterator) == 0 {
            throw DBusError(.invalidArgs, "\(member): missing argument \(index)")
        }
        return iterator
    }
}

/// The value inside a variant of a ``DBusMethodCallView``, read in place. Each accessor gives
/// `nil` when the value has another type.
package struct DBusVariantReader {
    var iterator = DBusMessageIter()

    /// The value when it is a `q`.
    package mutating func uint16() -> UInt16? {
        guard dbus_message_iter_get_arg_type(&iterator) == ABLE_DBUS_TYPE_UINT16 else { return nil }
        var value: UInt16 = 0
        dbus_message_iter_get_basic(&iterator, &value)
        return value
    }

    /// The value when it is a `b`.
    package mutating func boolean() -> Bool? {
        guard dbus_message_iter_get_arg_type(&iterator) == ABLE_DBUS_TYPE_BOOLEAN else { return nil }
        var value: UInt32 = 0
        dbus_message_iter_get_basic(&iterator, &value)
        return value != 0
    }

    /// The value when it is an `s`, as a `String`.
    package mutating func string() -> String? {
        cString(ABLE_DBUS_TYPE_STRING).map { String(cString: $0) }
    }

    /// The string, object path or signature of type `type`, in place.
    private mutating func cString(_ type: Int32) -> UnsafePointer<CChar>? {
        guard dbus_message_iter_get_arg_type(&iterator) == type else { return nil }
        var value: UnsafePointer<CChar>?
        dbus_message_iter_get_basic(&iterator, &value)
        return value
    }

    /// `body` applied to the UTF-8 of the value when it is an `o`, in place.
    package mutating func withObjectPath<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T? {
        guard let path = cString(ABLE_DBUS_TYPE_OBJECT_PATH) else { return nil }
        let length = strlen(path)
        return path.withMemoryRebound(to: UInt8.self, capacity: length + 1) { bytes in
            body(UnsafeBufferPointer(start: bytes, count: length))
        }
    }

    /// The value when it is an `ay`.
    package mutating func bytes() -> [UInt8]? {
        var storage = ByteStorage()
        return bytes(in: &storage)
    }

    /// The value when it is an `ay`, copied into `storage`'s array if it has room.
    package mutating func bytes(in storage: inout ByteStorage) -> [UInt8]? {
        guard dbus_message_iter_get_arg_type(&iterator) == ABLE_DBUS_TYPE_ARRAY,
            dbus_message_iter_get_element_type(&iterator) == ABLE_DBUS_TYPE_BYTE
        else { return nil }
        return Self.fixedBytes(in: &iterator, storage: &storage)
    }

    /// Walks the `a{sv}` that `dictionary` is at, handing `visit` each entry's key and a reader of
    /// its variant's value, while `visit` returns `true`. Returns whether it visited them all.
    ///
    /// - Throws: `malformed` (evaluated only then) when `dictionary` is not at an `a{sv}` (an
    ///   empty dictionary's key and value types are not checked), or what `visit` throws.
    static func forEachEntry(
        of dictionary: inout DBusMessageIter, malformed: @autoclosure () -> DBusError,
        _ visit: (_ key: UnsafePointer<CChar>, _ value: inout DBusVariantReader) throws(DBusError) -> Bool
    ) throws(DBusError) -> Bool {
        guard dbus_message_iter_get_arg_type(&dictionary) == ABLE_DBUS_TYPE_ARRAY,
            dbus_message_iter_get_element_type(&dictionary) == ABLE_DBUS_TYPE_DICT_ENTRY
        else { throw malformed() }
        var entries = DBusMessageIter()
        dbus_message_iter_recurse(&dictionary, &entries)
        while dbus_message_iter_get_arg_type(&entries) == ABLE_DBUS_TYPE_DICT_ENTRY {
            var entry = DBusMessageIter()
            dbus_message_iter_recurse(&entries, &entry)
            var key: UnsafePointer<CChar>?
            guard dbus_message_iter_get_arg_type(&entry) == ABLE_DBUS_TYPE_STRING else { throw malformed() }
            dbus_message_iter_get_basic(&entry, &key)
            guard let key, dbus_message_iter_next(&entry) != 0,
                dbus_message_iter_get_arg_type(&entry) == ABLE_DBUS_TYPE_VARIANT
            else { throw malformed() }
            var value = DBusVariantReader()
            dbus_message_iter_recurse(&entry, &value.iterator)
            guard try visit(key, &value) else { return false }
            dbus_message_iter_next(&entries)
        }
        return true
    }

    /// The bytes of the `ay` at `array`.
    static func fixedBytes(in array: inout DBusMessageIter) -> [UInt8] {
        var storage = ByteStorage()
        return fixedBytes(in: &array, storage: &storage)
    }

    /// The bytes of the `ay` at `array`, copied into `storage`'s array if it has room.
    static func fixedBytes(in array: inout DBusMessageIter, storage: inout ByteStorage) -> [UInt8] {
        var elements = DBusMessageIter()
        dbus_message_iter_recurse(&array, &elements)
        guard dbus_message_iter_get_arg_type(&elements) == ABLE_DBUS_TYPE_BYTE else { return [] }
        var pointer: UnsafeMutableRawPointer?
        var count: Int32 = 0
        dbus_message_iter_get_fixed_array(&elements, &pointer, &count)
        guard let pointer, count > 0 else { return [] }
        return storage.array(of: UnsafeRawBufferPointer(start: pointer, count: Int(count)))
    }
}
