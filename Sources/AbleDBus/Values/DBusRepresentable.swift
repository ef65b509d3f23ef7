/// A Swift type that converts to and from one D-Bus type.
///
/// The standard library's integers, `Bool`, `Double`, `String`, arrays and dictionaries of
/// representable types, ``DBusObjectPath``, ``DBusSignature``, ``DBusVariant`` and
/// ``DBusFileDescriptor`` conform. `[UInt8]` travels as `ay`, `[String: DBusVariant]` as `a{sv}`.
public protocol DBusRepresentable: Sendable {
    /// The D-Bus signature of every value of this type.
    static var dbusSignature: DBusSignature { get }

    /// Converts a received value.
    ///
    /// - Throws: ``DBusError`` (``DBusError/Name/invalidArgs``) naming the expected type when
    ///   `dbusValue` has another type or shape.
    init(dbusValue: DBusValue) throws(DBusError)

    /// The value to send.
    var dbusValue: DBusValue { get }
}

extension Bool: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .boolean }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .boolean(let v) = dbusValue else { throw .typeMismatch(expected: "boolean (b)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .boolean(self) }
}

extension UInt8: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .byte }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .byte(let v) = dbusValue else { throw .typeMismatch(expected: "byte (y)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .byte(self) }
}

extension Int16: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .int16 }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .int16(let v) = dbusValue else { throw .typeMismatch(expected: "int16 (n)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .int16(self) }
}

extension UInt16: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .uint16 }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .uint16(let v) = dbusValue else { throw .typeMismatch(expected: "uint16 (q)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .uint16(self) }
}

extension Int32: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .int32 }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .int32(let v) = dbusValue else { throw .typeMismatch(expected: "int32 (i)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .int32(self) }
}

extension UInt32: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .uint32 }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .uint32(let v) = dbusValue else { throw .typeMismatch(expected: "uint32 (u)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .uint32(self) }
}

extension Int64: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .int64 }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .int64(let v) = dbusValue else { throw .typeMismatch(expected: "int64 (x)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .int64(self) }
}

extension UInt64: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .uint64 }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .uint64(let v) = dbusValue else { throw .typeMismatch(expected: "uint64 (t)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .uint64(self) }
}

extension Double: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .double }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .double(let v) = dbusValue else { throw .typeMismatch(expected: "double (d)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .double(self) }
}

extension String: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .string }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .string(let v) = dbusValue else { throw .typeMismatch(expected: "string (s)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .string(self) }
}

extension DBusObjectPath: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .objectPath }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .objectPath(let v) = dbusValue else {
            throw .typeMismatch(expected: "object path (o)", got: dbusValue)
        }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .objectPath(self) }
}

extension DBusSignature: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .signature }
    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .signature(let v) = dbusValue else { throw .typeMismatch(expected: "signature (g)", got: dbusValue) }
        self = v
    }
    @inlinable public var dbusValue: DBusValue { .signature(self) }
}

extension DBusFileDescriptor: DBusRepresentable {
    public static var dbusSignature: DBusSignature { .unixFD }
    /// Takes the descriptor out of a received `h` value; a value can be taken once.
    public convenience init(dbusValue: DBusValue) throws(DBusError) {
        guard case .unixFD(let v) = dbusValue, let fd = v.take() else {
            throw .typeMismatch(expected: "unix fd (h) not yet taken", got: dbusValue)
        }
        self.init(owning: fd)
    }
    public var dbusValue: DBusValue { .unixFD(self) }
}

extension Array: DBusRepresentable where Element: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .array(Element.dbusSignature) }

    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        switch dbusValue {
        case .bytes(let bytes) where Element.self == UInt8.self:
            self = unsafeBitCast(bytes, to: [Element].self)
        case .bytes(let bytes) where Element.dbusSignature == .byte:
            self = try bytes.map { byte throws(DBusError) in try Element(dbusValue: .byte(byte)) }
        case .array(let signature, let elements) where signature == Element.dbusSignature:
            self = try elements.map { element throws(DBusError) in try Element(dbusValue: element) }
        default:
            throw .typeMismatch(expected: "array (\(Self.dbusSignature))", got: dbusValue)
        }
    }

    @inlinable public var dbusValue: DBusValue {
        if Element.self == UInt8.self { return .bytes(unsafeBitCast(self, to: [UInt8].self)) }
        return .array(Element.dbusSignature, map(\.dbusValue))
    }
}

extension Dictionary: DBusRepresentable where Key: DBusRepresentable, Value: DBusRepresentable {
    @inlinable public static var dbusSignature: DBusSignature { .dictionary(Key.dbusSignature, Value.dbusSignature) }

    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .dictionary(let keySignature, let valueSignature, let entries) = dbusValue,
            keySignature == Key.dbusSignature, valueSignature == Value.dbusSignature
        else {
            throw .typeMismatch(expected: "dictionary (\(Self.dbusSignature))", got: dbusValue)
        }
        var result: [Key: Value] = Dictionary(minimumCapacity: entries.count)
        for entry in entries {
            result[try Key(dbusValue: entry.key)] = try Value(dbusValue: entry.value)
        }
        self = result
    }

    @inlinable public var dbusValue: DBusValue {
        .dictionary(
            key: Key.dbusSignature, value: Value.dbusSignature,
            map { DBusDictionaryEntry(key: $0.key.dbusValue, value: $0.value.dbusValue) })
    }
}

/// A D-Bus variant: a value that carries its own type, as in `a{sv}` property dictionaries.
public struct DBusVariant: DBusRepresentable, Hashable, CustomStringConvertible {
    /// The value inside the variant.
    public var value: DBusValue

    /// Wraps a value.
    public init(_ value: DBusValue) {
        self.value = value
    }

    /// Wraps a representable Swift value.
    public init<T: DBusRepresentable>(_ value: T) {
        self.value = value.dbusValue
    }

    @inlinable public static var dbusSignature: DBusSignature { .variant }

    @inlinable public init(dbusValue: DBusValue) throws(DBusError) {
        guard case .variant(let inner) = dbusValue else { throw .typeMismatch(expected: "variant (v)", got: dbusValue) }
        value = inner
    }

    @inlinable public var dbusValue: DBusValue { .variant(value) }

    /// Converts the content to a Swift type.
    ///
    /// - Throws: ``DBusError`` naming the expected type when the content has another type.
    @inlinable public func decode<T: DBusRepresentable>(_ type: T.Type = T.self) throws(DBusError) -> T {
        try T(dbusValue: value)
    }

    public var description: String { value.description }
}

extension Dictionary where Key == String, Value == DBusVariant {
    /// Converts the entry named `key` to a Swift type, or returns `nil` when there is none.
    ///
    /// - Throws: ``DBusError`` naming the expected type and the key when the entry has another type.
    @inlinable public func decode<T: DBusRepresentable>(_ key: String, as type: T.Type = T.self) throws(DBusError) -> T?
    {
        guard let variant = self[key] else { return nil }
        do {
            return try T(dbusValue: variant.value)
        } catch {
            throw DBusError(error.name, "\(key): \(error.message)")
        }
    }
}
