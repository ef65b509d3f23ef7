/// Hexadecimal text helpers shared by the value types that parse and print identifiers.
package enum Hex {
    /// Returns the value of one ASCII hex digit, in either case.
    ///
    /// - Parameter character: A UTF-8 code unit.
    /// - Returns: The digit's value in `0...15`, or `nil` if `character` is not a hex digit.
    @inlinable package static func value(of character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Parses a run of hex digits into an unsigned integer.
    ///
    /// - Parameter digits: UTF-8 code units; the caller bounds their count to what fits `Value`.
    /// - Returns: The value, or `nil` if `digits` is empty or holds anything but hex digits.
    ///
    /// Inlinable, so that other modules get it specialized for their integer and collection:
    /// unspecialized, each digit's conversion goes through the runtime's dynamic casts.
    @inlinable package static func parse<Value: FixedWidthInteger & UnsignedInteger>(
        _ digits: some Collection<UInt8>,
        as _: Value.Type = Value.self
    ) -> Value? {
        guard !digits.isEmpty else { return nil }
        var value: Value = 0
        for character in digits {
            guard let digit = Hex.value(of: character) else { return nil }
            value = value << 4 | Value(digit)
        }
        return value
    }

    /// Formats an integer as a fixed number of hex digits, zero-padded.
    ///
    /// - Parameters:
    ///   - value: The value to format.
    ///   - digits: The number of digits to produce; higher digits of `value` are dropped.
    ///   - uppercase: Whether to use `A`–`F` rather than `a`–`f`.
    /// - Returns: Exactly `digits` hex digits.
    package static func format(_ value: some BinaryInteger, digits: Int, uppercase: Bool = false) -> String {
        let text = String(value, radix: 16, uppercase: uppercase)
        if text.count >= digits {
            return String(text.suffix(digits))
        }
        return String(repeating: "0", count: digits - text.count) + text
    }

    /// Formats bytes as hex digits, two per byte, with no separator.
    package static func string(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { format($0, digits: 2) }.joined()
    }
}
