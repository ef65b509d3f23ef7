/// A JSON value, written with its object keys in the order given, so `--json` output is stable
/// and diffable.
package enum JSON: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral
{
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    package init(stringLiteral value: String) { self = .string(value) }
    package init(integerLiteral value: Int) { self = .int(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }

    package static func == (lhs: JSON, rhs: JSON) -> Bool { lhs.text == rhs.text }

    /// `nil` as `null`, anything else through `wrap`.
    package static func optional<T>(_ value: T?, _ wrap: (T) -> JSON) -> JSON { value.map(wrap) ?? .null }

    /// The value as compact JSON text on one line.
    package var text: String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .null: output += "null"
        case .bool(let value): output += value ? "true" : "false"
        case .int(let value): output += String(value)
        case .double(let value): output += value.isFinite ? String(value) : "null"
        case .string(let value): JSON.quote(value, into: &output)
        case .array(let values):
            output += "["
            for (index, value) in values.enumerated() {
                if index > 0 { output += "," }
                value.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { output += "," }
                JSON.quote(key, into: &output)
                output += ":"
                value.write(to: &output)
            }
            output += "}"
        }
    }

    /// Writes `string` as a JSON string literal: quotes, backslashes and line breaks escaped
    /// briefly, every other character ``Console/escaped(_:)`` escapes as `\uXXXX`.
    private static func quote(_ string: String, into output: inout String) {
        output += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where Console.needsEscaping(scalar):
                // Control characters must be escaped in JSON; DEL, the C1 controls and the
                // bidirectional overrides may be, and are, so that `--json` output read on a
                // terminal cannot rewrite it either. A decoder gets the same string back.
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
