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
    /// The digits are written in place, with no text in between: the BlueZ backend names an
    /// attribute's object after its handles on every request, and a UUID's text is 32 of them.
    /// Four digits or fewer are a small string, with no allocation.
    ///
    /// - Parameters:
    ///   - value: The value to format.
    ///   - digits: The number of digits to produce, at most 32; higher digits of `value` are dropped.
    ///   - uppercase: Whether to use `A`–`F` rather than `a`–`f`.
    /// - Returns: Exactly `digits` hex digits.
    package static func format(_ value: some BinaryInteger, digits: Int, uppercase: Bool = false) -> String {
        precondition((0...32).contains(digits), "Hex.format writes 0 to 32 digits, not \(digits)")
        // Two words hold every digit asked for; the rest is not generic, so not a call through a
        // witness table per digit.
        return format(
            low: UInt64(truncatingIfNeeded: value), high: UInt64(truncatingIfNeeded: value >> 64), digits: digits,
            uppercase: uppercase)
    }

    private static func format(low: UInt64, high: UInt64, digits: Int, uppercase: Bool) -> String {
        let letters = uppercase ? UInt8(ascii: "A") : UInt8(ascii: "a")
        return String(unsafeUninitializedCapacity: digits) { text in
            for position in 0..<digits {
                let word = position < 16 ? low : high
                let value = UInt8(truncatingIfNeeded: word >> UInt64(4 * (position % 16))) & 0xF
                text[digits - 1 - position] = digit(value, letters: letters)
            }
            return digits
        }
    }

    /// Formats bytes as lowercase hex digits, two per byte, with no separator, written in place.
    package static func string(_ bytes: some Collection<UInt8>) -> String {
        String(unsafeUninitializedCapacity: 2 * bytes.count) { text in
            var position = 0
            for byte in bytes {
                text[position] = digit(byte >> 4, letters: UInt8(ascii: "a"))
                text[position + 1] = digit(byte & 0xF, letters: UInt8(ascii: "a"))
                position += 2
            }
            return position
        }
    }

    /// The ASCII digit of a value in `0...15`, its letters from `letters` (`a` or `A`) on.
    private static func digit(_ value: UInt8, letters: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : letters + value - 10
    }
}
