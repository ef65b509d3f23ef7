import CDBus

/// A D-Bus type signature, such as `a{sv}` or `(oa{sa{sv}})`.
///
/// Signatures are validated when they are created, so every `DBusSignature` value is one that
/// libdbus accepts. The corresponding libdbus function is `dbus_signature_validate`.
public struct DBusSignature: RawRepresentable, Hashable, Sendable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The signature's text, for example `"a{sv}"`.
    public let rawValue: String

    /// Creates a signature from its text, or returns `nil` when the text is not a valid signature.
    ///
    /// - Parameter rawValue: The signature's text; the empty string is the signature of no values.
    public init?(rawValue: String) {
        guard rawValue.utf8.count <= 255, !rawValue.utf8.contains(0) else { return nil }
        if !rawValue.isEmpty {
            let valid = rawValue.withCString { dbus_signature_validate($0, nil) != 0 }
            guard valid else { return nil }
        }
        self.rawValue = rawValue
    }

    /// Creates a signature from a literal; an invalid literal is a programming error.
    public init(stringLiteral value: String) {
        guard let signature = DBusSignature(rawValue: value) else {
            preconditionFailure("'\(value)' is not a valid D-Bus signature")
        }
        self = signature
    }

    init(unchecked rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    /// Whether this signature is exactly one complete type (as an array element or a variant's content must be).
    public var isSingleCompleteType: Bool {
        !rawValue.isEmpty && rawValue.withCString { dbus_signature_validate_single($0, nil) != 0 }
    }

    /// The complete types this signature is made of, in order (`"sa{sv}as"` gives `s`, `a{sv}`, `as`).
    public var completeTypes: [DBusSignature] {
        var result: [DBusSignature] = []
        var index = rawValue.utf8.startIndex
        let utf8 = rawValue.utf8
        while index < utf8.endIndex {
            let end = Self.endOfCompleteType(in: utf8, from: index)
            result.append(DBusSignature(unchecked: String(rawValue[index..<end])))
            index = end
        }
        return result
    }

    /// The complete type at `position` in ``completeTypes``, found without building that list;
    /// `nil` past its end.
    package func completeType(at position: Int) -> DBusSignature? {
        let utf8 = rawValue.utf8
        var index = utf8.startIndex
        for _ in 0..<position {
            guard index < utf8.endIndex else { return nil }
            index = Self.endOfCompleteType(in: utf8, from: index)
        }
        guard index < utf8.endIndex else { return nil }
        return DBusSignature(unchecked: String(rawValue[index..<Self.endOfCompleteType(in: utf8, from: index)]))
    }

    private static func endOfCompleteType(in utf8: String.UTF8View, from start: String.Index) -> String.Index {
        var index = start
        // An array's element type follows its `a`, so skip every leading `a`.
        while utf8[index] == UInt8(ascii: "a") { index = utf8.index(after: index) }
        var depth = 0
        repeat {
            let code = utf8[index]
            if code == UInt8(ascii: "(") || code == UInt8(ascii: "{") {
                depth += 1
            } else if code == UInt8(ascii: ")") || code == UInt8(ascii: "}") {
                depth -= 1
            }
            index = utf8.index(after: index)
        } while depth > 0
        return index
    }

    /// A byte (`y`).
    public static let byte: DBusSignature = "y"
    /// A boolean (`b`).
    public static let boolean: DBusSignature = "b"
    /// A signed 16-bit integer (`n`).
    public static let int16: DBusSignature = "n"
    /// An unsigned 16-bit integer (`q`).
    public static let uint16: DBusSignature = "q"
    /// A signed 32-bit integer (`i`).
    public static let int32: DBusSignature = "i"
    /// An unsigned 32-bit integer (`u`).
    public static let uint32: DBusSignature = "u"
    /// A signed 64-bit integer (`x`).
    public static let int64: DBusSignature = "x"
    /// An unsigned 64-bit integer (`t`).
    public static let uint64: DBusSignature = "t"
    /// A double (`d`).
    public static let double: DBusSignature = "d"
    /// A string (`s`).
    public static let string: DBusSignature = "s"
    /// An object path (`o`).
    public static let objectPath: DBusSignature = "o"
    /// A signature (`g`).
    public static let signature: DBusSignature = "g"
    /// A Unix file descriptor (`h`).
    public static let unixFD: DBusSignature = "h"
    /// A variant (`v`).
    public static let variant: DBusSignature = "v"

    /// An array of bytes (`ay`), what ``DBusValue/bytes(_:)`` carries.
    static let bytes = DBusSignature(unchecked: "ay")

    /// The signature of an array of `element`.
    public static func array(_ element: DBusSignature) -> DBusSignature {
        DBusSignature(unchecked: "a" + element.rawValue)
    }

    /// The signature of a dictionary from `key` (a basic type) to `value`.
    public static func dictionary(_ key: DBusSignature, _ value: DBusSignature) -> DBusSignature {
        DBusSignature(unchecked: "a{" + key.rawValue + value.rawValue + "}")
    }

    /// The signature of a structure with the given fields.
    public static func structure(_ fields: [DBusSignature]) -> DBusSignature {
        DBusSignature(unchecked: "(" + fields.map(\.rawValue).joined() + ")")
    }
}
