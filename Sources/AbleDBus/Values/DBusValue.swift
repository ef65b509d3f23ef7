/// One D-Bus value of any type, as it travels in a message.
///
/// Received messages always carry byte arrays (`ay`) as ``bytes(_:)``, never as an ``array(_:_:)``
/// of ``byte(_:)`` values. Both forms are accepted when sending.
///
/// To turn a value into a Swift type, use ``decode(_:)`` with any ``DBusRepresentable`` type;
/// a value of another type or shape throws a ``DBusError`` naming what was expected.
public enum DBusValue: Hashable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(DBusObjectPath)
    case signature(DBusSignature)
    /// A Unix file descriptor; see ``DBusFileDescriptor`` for who owns it.
    case unixFD(DBusFileDescriptor)
    /// An array whose elements all have the signature `element`.
    case array(_ element: DBusSignature, _ elements: [DBusValue])
    /// An array of bytes (`ay`).
    case bytes([UInt8])
    /// A dictionary (`a{kv}`) in the order its entries travel; keys are basic values.
    case dictionary(key: DBusSignature, value: DBusSignature, _ entries: [DBusDictionaryEntry])
    /// A structure (`(...)`).
    case structure([DBusValue])
    /// A variant (`v`): a value that carries its own signature.
    indirect case variant(DBusValue)

    /// The signature of this value.
    public var signature: DBusSignature {
        switch self {
        case .byte: .byte
        case .boolean: .boolean
        case .int16: .int16
        case .uint16: .uint16
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .double: .double
        case .string: .string
        case .objectPath: .objectPath
        case .signature: .signature
        case .unixFD: .unixFD
        case .array(let element, _): .array(element)
        case .bytes: .bytes
        case .dictionary(let key, let value, _): .dictionary(key, value)
        case .structure(let fields): .structure(fields.map(\.signature))
        case .variant: .variant
        }
    }

    /// Converts this value to a Swift type.
    ///
    /// - Parameter type: The type to convert to.
    /// - Returns: The converted value.
    /// - Throws: ``DBusError`` with the name ``DBusError/Name/invalidArgs`` when the value has
    ///   another type or shape; its message names what was expected and what arrived.
    @inlinable public func decode<T: DBusRepresentable>(_ type: T.Type = T.self) throws(DBusError) -> T {
        try T(dbusValue: self)
    }

    /// The content of a variant, or the value itself when it is not a variant.
    public var unwrappingVariant: DBusValue {
        if case .variant(let inner) = self { return inner.unwrappingVariant }
        return self
    }
}

/// One entry of a D-Bus dictionary.
public struct DBusDictionaryEntry: Hashable, Sendable {
    /// The entry's key, a basic type.
    public var key: DBusValue
    /// The entry's value.
    public var value: DBusValue

    /// An entry of `key` and `value`.
    public init(key: DBusValue, value: DBusValue) {
        self.key = key
        self.value = value
    }
}

extension DBusValue: CustomStringConvertible {
    public var description: String {
        switch self {
        case .byte(let v): "byte \(v)"
        case .boolean(let v): "boolean \(v)"
        case .int16(let v): "int16 \(v)"
        case .uint16(let v): "uint16 \(v)"
        case .int32(let v): "int32 \(v)"
        case .uint32(let v): "uint32 \(v)"
        case .int64(let v): "int64 \(v)"
        case .uint64(let v): "uint64 \(v)"
        case .double(let v): "double \(v)"
        case .string(let v): "string \"\(v)\""
        case .objectPath(let v): "object path \(v)"
        case .signature(let v): "signature \(v)"
        case .unixFD(let v): "unix fd \(v)"
        case .array(let sig, let elements): "array of \(sig) [\(elements.map(\.description).joined(separator: ", "))]"
        case .bytes(let bytes): "bytes [\(bytes.map { String($0, radix: 16) }.joined(separator: " "))]"
        case .dictionary(_, _, let entries):
            "dict {\(entries.map { "\($0.key): \($0.value)" }.joined(separator: ", "))}"
        case .structure(let fields): "struct (\(fields.map(\.description).joined(separator: ", ")))"
        case .variant(let inner): "variant <\(inner)>"
        }
    }
}
