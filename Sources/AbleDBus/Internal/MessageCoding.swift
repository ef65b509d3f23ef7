import CDBus

#if canImport(Glibc)
    import Glibc
#endif

/// Reading and writing message arguments with `DBusMessageIter`.
enum MessageCoding {
    /// Decodes every argument of `message`.
    static func decodeArguments(of message: OpaquePointer) throws(DBusError) -> [DBusValue] {
        var strings: RecentStrings?
        return try decodeArguments(of: message, strings: &strings)
    }

    /// Decodes every argument of `message`, taking its long strings and object paths from
    /// `strings` when they are recent ones (see ``RecentStrings/bodyString(_:)``).
    static func decodeArguments(
        of message: OpaquePointer, strings: inout RecentStrings?
    ) throws(DBusError) -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        let signature = dbus_message_get_signature(message)
        var values: [DBusValue] = []
        // The signature's length bounds the number of arguments: reserving that much at once
        // saves the regrowths of appending them one at a time (two for a PropertiesChanged).
        if let signature { values.reserveCapacity(strlen(signature)) }
        var position = 0
        repeat {
            if dbus_message_iter_get_arg_type(&iter) == ABLE_DBUS_TYPE_ARRAY {
                values.append(
                    try decodeArray(&iter, strings: &strings, signature: argumentSignature(position, in: signature)))
            } else {
                values.append(try decode(&iter, strings: &strings))
            }
            position += 1
        } while dbus_message_iter_next(&iter) != 0
        return values
    }

    /// The signature of argument `position`, from the message's `signature`.
    private static func argumentSignature(_ position: Int, in signature: UnsafePointer<CChar>?) -> DBusSignature? {
        signature.flatMap { DBusSignature(unchecked: String(cString: $0)).completeType(at: position) }
    }

    private static func decode(
        _ iter: inout DBusMessageIter, strings: inout RecentStrings?
    ) throws(DBusError) -> DBusValue {
        let type = dbus_message_iter_get_arg_type(&iter)
        switch type {
        case ABLE_DBUS_TYPE_BYTE:
            var v: UInt8 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .byte(v)
        case ABLE_DBUS_TYPE_BOOLEAN:
            var v: dbus_bool_t = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .boolean(v != 0)
        case ABLE_DBUS_TYPE_INT16:
            var v: Int16 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .int16(v)
        case ABLE_DBUS_TYPE_UINT16:
            var v: UInt16 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .uint16(v)
        case ABLE_DBUS_TYPE_INT32:
            var v: Int32 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .int32(v)
        case ABLE_DBUS_TYPE_UINT32:
            var v: UInt32 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .uint32(v)
        case ABLE_DBUS_TYPE_INT64:
            var v: Int64 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .int64(v)
        case ABLE_DBUS_TYPE_UINT64:
            var v: UInt64 = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .uint64(v)
        case ABLE_DBUS_TYPE_DOUBLE:
            var v: Double = 0
            dbus_message_iter_get_basic(&iter, &v)
            return .double(v)
        case ABLE_DBUS_TYPE_STRING:
            return .string(basicString(&iter, strings: &strings))
        case ABLE_DBUS_TYPE_OBJECT_PATH:
            return .objectPath(DBusObjectPath(unchecked: basicString(&iter, strings: &strings)))
        case ABLE_DBUS_TYPE_SIGNATURE:
            return .signature(DBusSignature(unchecked: basicString(&iter, strings: &strings)))
        case ABLE_DBUS_TYPE_UNIX_FD:
            var fd: Int32 = -1
            dbus_message_iter_get_basic(&iter, &fd)
            guard fd >= 0 else { throw DBusError(.invalidArgs, "a unix fd argument carried no descriptor") }
            return .unixFD(DBusFileDescriptor(owning: fd))
        case ABLE_DBUS_TYPE_VARIANT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .variant(try decode(&sub, strings: &strings))
        case ABLE_DBUS_TYPE_STRUCT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var fields: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != ABLE_DBUS_TYPE_INVALID {
                fields.append(try decode(&sub, strings: &strings))
                dbus_message_iter_next(&sub)
            }
            return .structure(fields)
        case ABLE_DBUS_TYPE_ARRAY:
            return try decodeArray(&iter, strings: &strings)
        default:
            throw DBusError(.invalidArgs, "unsupported D-Bus type code \(type)")
        }
    }

    /// Decodes an array. `signature` is the array's own signature when the caller knows it
    /// without libdbus: an empty array's element signature is then taken from it, rather than
    /// from `dbus_message_iter_get_signature`, which allocates a copy (two allocations per empty
    /// array, such as the empty options of most of BlueZ's calls).
    private static func decodeArray(
        _ iter: inout DBusMessageIter, strings: inout RecentStrings?,
        signature: @autoclosure () -> DBusSignature? = nil
    ) throws(DBusError) -> DBusValue {
        let elementType = dbus_message_iter_get_element_type(&iter)
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &sub)
        if elementType == ABLE_DBUS_TYPE_BYTE {
            var pointer: UnsafeMutableRawPointer?
            var count: Int32 = 0
            if dbus_message_iter_get_arg_type(&sub) == ABLE_DBUS_TYPE_INVALID { return .bytes([]) }
            dbus_message_iter_get_fixed_array(&sub, &pointer, &count)
            guard let pointer, count > 0 else { return .bytes([]) }
            return .bytes(Array(UnsafeRawBufferPointer(start: pointer, count: Int(count))))
        }
        if elementType == ABLE_DBUS_TYPE_DICT_ENTRY {
            let keySignature: DBusSignature
            let valueSignature: DBusSignature
            if let (key, value) = entryTypeCodes(of: sub) {
                keySignature = key
                valueSignature = value
            } else {
                let entryTypes = elementSignature(of: &sub, known: signature()).rawValue.utf8.dropFirst().dropLast()
                keySignature = DBusSignature(unchecked: String(Character(Unicode.Scalar(entryTypes.first!))))
                valueSignature = DBusSignature(unchecked: String(decoding: entryTypes.dropFirst(), as: UTF8.self))
            }
            var entries: [DBusDictionaryEntry] = []
            // Room for 8 at once: most dictionaries on the bus are that small (BlueZ's request
            // options carry 3 to 5 entries), and appending to an empty array one entry at a time
            // regrows it at 2 and at 4.
            if dbus_message_iter_get_arg_type(&sub) == ABLE_DBUS_TYPE_DICT_ENTRY { entries.reserveCapacity(8) }
            while dbus_message_iter_get_arg_type(&sub) == ABLE_DBUS_TYPE_DICT_ENTRY {
                var entry = DBusMessageIter()
                dbus_message_iter_recurse(&sub, &entry)
                let key = try decode(&entry, strings: &strings)
                dbus_message_iter_next(&entry)
                let value = try decode(&entry, strings: &strings)
                entries.append(DBusDictionaryEntry(key: key, value: value))
                dbus_message_iter_next(&sub)
            }
            return .dictionary(key: keySignature, value: valueSignature, entries)
        }
        let element = singleCodeSignature(elementType) ?? elementSignature(of: &sub, known: signature())
        var elements: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&sub) != ABLE_DBUS_TYPE_INVALID {
            elements.append(try decode(&sub, strings: &strings))
            dbus_message_iter_next(&sub)
        }
        return .array(element, elements)
    }

    /// The signature of a basic type or variant from its type code, without asking libdbus
    /// (which allocates a copy of the signature); `nil` for containers. Each is a string literal:
    /// no allocation, and no lazily made table to check for on every array.
    private static func singleCodeSignature(_ type: Int32) -> DBusSignature? {
        switch type {
        case ABLE_DBUS_TYPE_BYTE: DBusSignature(unchecked: "y")
        case ABLE_DBUS_TYPE_BOOLEAN: DBusSignature(unchecked: "b")
        case ABLE_DBUS_TYPE_INT16: DBusSignature(unchecked: "n")
        case ABLE_DBUS_TYPE_UINT16: DBusSignature(unchecked: "q")
        case ABLE_DBUS_TYPE_INT32: DBusSignature(unchecked: "i")
        case ABLE_DBUS_TYPE_UINT32: DBusSignature(unchecked: "u")
        case ABLE_DBUS_TYPE_INT64: DBusSignature(unchecked: "x")
        case ABLE_DBUS_TYPE_UINT64: DBusSignature(unchecked: "t")
        case ABLE_DBUS_TYPE_DOUBLE: DBusSignature(unchecked: "d")
        case ABLE_DBUS_TYPE_STRING: DBusSignature(unchecked: "s")
        case ABLE_DBUS_TYPE_OBJECT_PATH: DBusSignature(unchecked: "o")
        case ABLE_DBUS_TYPE_SIGNATURE: DBusSignature(unchecked: "g")
        case ABLE_DBUS_TYPE_UNIX_FD: DBusSignature(unchecked: "h")
        case ABLE_DBUS_TYPE_VARIANT: DBusSignature(unchecked: "v")
        default: nil
        }
    }

    /// The key and value signatures of a non-empty dictionary whose values are basic or variants,
    /// read from its first entry; `nil` otherwise (the caller then asks libdbus).
    private static func entryTypeCodes(of array: DBusMessageIter) -> (DBusSignature, DBusSignature)? {
        var array = array
        guard dbus_message_iter_get_arg_type(&array) == ABLE_DBUS_TYPE_DICT_ENTRY else { return nil }
        var entry = DBusMessageIter()
        dbus_message_iter_recurse(&array, &entry)
        guard let key = singleCodeSignature(dbus_message_iter_get_arg_type(&entry)),
            dbus_message_iter_next(&entry) != 0,
            let value = singleCodeSignature(dbus_message_iter_get_arg_type(&entry))
        else { return nil }
        return (key, value)
    }

    /// The element signature of the array `sub` iterates: from the array's `known` signature when
    /// given, else from libdbus.
    private static func elementSignature(of sub: inout DBusMessageIter, known: DBusSignature?) -> DBusSignature {
        if let known, known.rawValue.utf8.first == UInt8(ascii: "a") {
            return DBusSignature(unchecked: String(known.rawValue.dropFirst()))
        }
        guard let raw = dbus_message_iter_get_signature(&sub) else { return "" }
        defer { dbus_free(raw) }
        return DBusSignature(unchecked: String(cString: raw))
    }

    private static func basicString(_ iter: inout DBusMessageIter, strings: inout RecentStrings?) -> String {
        var pointer: UnsafePointer<CChar>?
        dbus_message_iter_get_basic(&iter, &pointer)
        guard let pointer else { return "" }
        return strings?.bodyString(pointer) ?? String(cString: pointer)
    }

    // MARK: - Encoding

    /// Appends `values` to `message`, after checking that libdbus will accept every one of them.
    static func append(_ values: [DBusValue], to message: OpaquePointer) throws(DBusError) {
        for value in values { try validate(value) }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(message, &iter)
        for value in values {
            guard encode(value, into: &iter) else { throw DBusError(.noMemory, "could not append \(value)") }
        }
    }

    /// Checks what libdbus would otherwise reject with a warning: element types that differ from
    /// the array's signature, embedded NUL characters, non-basic dictionary keys.
    static func validate(_ value: DBusValue) throws(DBusError) {
        switch value {
        case .string(let text):
            if text.utf8.contains(0) { throw DBusError(.invalidArgs, "a D-Bus string cannot contain NUL") }
        case .array(let signature, let elements):
            guard signature.isSingleCompleteType else {
                throw DBusError(.invalidSignature, "array element signature '\(signature)' is not one complete type")
            }
            for element in elements {
                guard element.signature == signature else {
                    throw DBusError(.invalidArgs, "array of \(signature) holds \(element.signature)")
                }
                try validate(element)
            }
        case .dictionary(let keySignature, let valueSignature, let entries):
            guard keySignature.rawValue.utf8.count == 1, !"vahr(){}".utf8.contains(keySignature.rawValue.utf8.first!)
            else { throw DBusError(.invalidSignature, "dictionary key '\(keySignature)' is not a basic type") }
            guard valueSignature.isSingleCompleteType else {
                throw DBusError(.invalidSignature, "dictionary value '\(valueSignature)' is not one complete type")
            }
            for entry in entries {
                guard entry.key.signature == keySignature, entry.value.signature == valueSignature else {
                    throw DBusError(
                        .invalidArgs,
                        "dictionary {\(keySignature)\(valueSignature)} holds {\(entry.key.signature)\(entry.value.signature)}"
                    )
                }
                try validate(entry.key)
                try validate(entry.value)
            }
        case .structure(let fields):
            guard !fields.isEmpty else { throw DBusError(.invalidArgs, "a D-Bus structure needs at least one field") }
            for field in fields { try validate(field) }
        case .variant(let inner):
            try validate(inner)
        case .unixFD(let descriptor):
            if descriptor.rawValue == nil { throw DBusError(.invalidArgs, "the file descriptor was already taken") }
        default:
            break
        }
    }

    private static func encode(_ value: DBusValue, into iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(var v): return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_BYTE, &v) != 0
        case .boolean(let b):
            var v: dbus_bool_t = b ? 1 : 0
            return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_BOOLEAN, &v) != 0
        case .int16(var v): return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_INT16, &v) != 0
        case .uint16(var v): return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_UINT16, &v) != 0
        case .int32(var v): return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_INT32, &v) != 0
        case .uint32(var v): return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_UINT32, &v) != 0
        case .int64(var v): return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_INT64, &v) != 0
        case .uint64(var v): return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_UINT64, &v) != 0
        case .double(var v): return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_DOUBLE, &v) != 0
        case .string(let s): return appendString(s, type: ABLE_DBUS_TYPE_STRING, into: &iter)
        case .objectPath(let p): return appendString(p.rawValue, type: ABLE_DBUS_TYPE_OBJECT_PATH, into: &iter)
        case .signature(let g): return appendString(g.rawValue, type: ABLE_DBUS_TYPE_SIGNATURE, into: &iter)
        case .unixFD(let descriptor):
            guard var fd = descriptor.rawValue else { return false }
            return dbus_message_iter_append_basic(&iter, ABLE_DBUS_TYPE_UNIX_FD, &fd) != 0
        case .bytes(let bytes):
            return withContainer(ABLE_DBUS_TYPE_ARRAY, signature: "y", iter: &iter) { sub in
                bytes.withUnsafeBufferPointer { buffer in
                    var base = buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!
                    return dbus_message_iter_append_fixed_array(&sub, ABLE_DBUS_TYPE_BYTE, &base, Int32(buffer.count))
                        != 0
                }
            }
        case .array(let signature, let elements):
            return withContainer(ABLE_DBUS_TYPE_ARRAY, signature: signature.rawValue, iter: &iter) { sub in
                elements.allSatisfy { encode($0, into: &sub) }
            }
        case .dictionary(let keySignature, let valueSignature, let entries):
            let entrySignature = "{" + keySignature.rawValue + valueSignature.rawValue + "}"
            return withContainer(ABLE_DBUS_TYPE_ARRAY, signature: entrySignature, iter: &iter) { sub in
                entries.allSatisfy { entry in
                    withContainer(ABLE_DBUS_TYPE_DICT_ENTRY, signature: nil, iter: &sub) { entryIter in
                        encode(entry.key, into: &entryIter) && encode(entry.value, into: &entryIter)
                    }
                }
            }
        case .structure(let fields):
            return withContainer(ABLE_DBUS_TYPE_STRUCT, signature: nil, iter: &iter) { sub in
                fields.allSatisfy { encode($0, into: &sub) }
            }
        case .variant(let inner):
            return withContainer(ABLE_DBUS_TYPE_VARIANT, signature: inner.signature.rawValue, iter: &iter) { sub in
                encode(inner, into: &sub)
            }
        }
    }

    private static func appendString(_ text: String, type: Int32, into iter: inout DBusMessageIter) -> Bool {
        text.withCString { pointer in
            var p: UnsafePointer<CChar>? = pointer
            return dbus_message_iter_append_basic(&iter, type, &p) != 0
        }
    }

    private static func withContainer(
        _ type: Int32, signature: String?, iter: inout DBusMessageIter,
        _ body: (inout DBusMessageIter) -> Bool
    ) -> Bool {
        var sub = DBusMessageIter()
        let opened: Bool
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) } != 0
        } else {
            opened = dbus_message_iter_open_container(&iter, type, nil, &sub) != 0
        }
        guard opened else { return false }
        guard body(&sub) else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }
}
