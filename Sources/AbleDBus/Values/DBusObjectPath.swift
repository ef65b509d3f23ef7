/// A D-Bus object path, such as `/org/bluez/hci0/dev_00_AA_01_01_00_01`.
///
/// Paths are validated when they are created: they start with `/`, their elements are made of
/// `[A-Za-z0-9_]`, and no element is empty (the root `/` excepted).
public struct DBusObjectPath: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The path's text.
    public let rawValue: String

    /// The root path, `/`.
    public static let root = DBusObjectPath(unchecked: "/")

    /// Creates a path from its text, or returns `nil` when the text is not a valid object path.
    public init?(rawValue: String) {
        guard Self.isValid(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// Creates a path from a literal; an invalid literal is a programming error.
    public init(stringLiteral value: String) {
        guard let path = DBusObjectPath(rawValue: value) else {
            preconditionFailure("'\(value)' is not a valid D-Bus object path")
        }
        self = path
    }

    /// A path whose text the caller made valid by construction, taken without checking it again.
    package init(unchecked rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    public static func < (lhs: DBusObjectPath, rhs: DBusObjectPath) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The path with `element` appended, or `nil` when `element` is not a valid path element.
    public func appending(_ element: String) -> DBusObjectPath? {
        DBusObjectPath(rawValue: self == .root ? "/" + element : rawValue + "/" + element)
    }

    /// The last element of the path (empty for the root).
    public var lastElement: String {
        guard let slash = rawValue.utf8.lastIndex(of: UInt8(ascii: "/")) else { return rawValue }
        return String(rawValue[rawValue.utf8.index(after: slash)...])
    }

    /// The parent path, or `nil` for the root.
    public var parent: DBusObjectPath? {
        guard self != .root, let slash = rawValue.utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        return slash == rawValue.startIndex ? .root : DBusObjectPath(unchecked: String(rawValue[..<slash]))
    }

    /// Whether this path is `ancestor` or lies below it.
    public func isDescendant(of ancestor: DBusObjectPath, includingSelf: Bool = true) -> Bool {
        if self == ancestor { return includingSelf }
        if ancestor == .root { return true }
        return rawValue.hasPrefix(ancestor.rawValue)
            && rawValue.utf8.dropFirst(ancestor.rawValue.utf8.count).first == UInt8(ascii: "/")
    }

    static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        guard bytes.last != UInt8(ascii: "/") else { return false }
        var previousWasSlash = false
        for byte in bytes {
            if byte == UInt8(ascii: "/") {
                if previousWasSlash { return false }
                previousWasSlash = true
                continue
            }
            previousWasSlash = false
            let isLetter = (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
            let isDigit = byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
            guard isLetter || isDigit || byte == UInt8(ascii: "_") else { return false }
        }
        return true
    }
}
