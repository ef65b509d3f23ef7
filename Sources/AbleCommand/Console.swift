import AbleIO

#if canImport(Glibc)
    import Glibc
#endif

/// Where a command's output goes: results to standard output (text, or JSON Lines with
/// `--json`), progress and errors to standard error, so a pipe receives only results.
///
/// Tests capture both with ``Console/capturing()``.
package struct Console: Sendable {
    /// Whether results are JSON Lines rather than text.
    package var json: Bool
    package let writeOut: @Sendable (String) -> Void
    package let writeError: @Sendable (String) -> Void

    /// The process's standard output and standard error, each line written at once.
    package static func standard(json: Bool = false) -> Console {
        Console(
            json: json, writeOut: { writeLine($0, to: STDOUT_FILENO) }, writeError: { writeLine($0, to: STDERR_FILENO) }
        )
    }

    /// Writes `line` and a newline with `write(2)`, so lines from concurrent tasks never interleave.
    private static func writeLine(_ line: String, to descriptor: CInt) {
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written > 0 {
                offset += written
            } else if written < 0 && errno == EINTR {
                continue
            } else {
                return
            }
        }
    }

    /// A console that keeps what it is given, for tests.
    static func capturing(json: Bool = false) -> (Console, CapturedOutput) {
        let captured = CapturedOutput()
        return (
            Console(
                json: json, writeOut: { captured.append(out: $0) }, writeError: { captured.append(error: $0) }),
            captured
        )
    }

    /// Prints a result: `text` in text mode, `json` (one line) with `--json`.
    ///
    /// Text from remote devices or from BlueZ in `text` must already be ``escaped(_:)``; any
    /// control or bidirectional character still in it is escaped here as well (line feeds kept),
    /// so that a place that forgot cannot rewrite the user's terminal.
    package func result(_ text: @autoclosure () -> String, json object: @autoclosure () -> JSON) {
        writeOut(json ? object().text : Self.neutralized(text()))
    }

    /// Prints a line of progress on standard error, in text mode only, neutralized as
    /// ``result(_:json:)`` does.
    package func progress(_ text: String) {
        if !json { writeError(Self.neutralized(text)) }
    }

    /// Prints an error on standard error, in both modes, neutralized as ``result(_:json:)`` does.
    package func error(_ text: String) {
        writeError(Self.neutralized(text))
    }
}

// MARK: - Text from elsewhere, made safe for a terminal

extension Console {
    /// `text` made safe to print on a terminal, for text that a remote device, a central or a
    /// daemon chose: device names and aliases, values shown as text, error messages.
    ///
    /// C0 controls and DEL become `\x1b`-style escapes, C1 controls (U+0080–U+009F) and the
    /// bidirectional embedding, override and isolate characters (U+202A–U+202E, U+2066–U+2069)
    /// `\u{202e}`-style ones, and a backslash becomes `\\`, so that every escape reads back
    /// unambiguously; everything else (accents, CJK, emoji) stays as it is. The result holds no
    /// line break: one name or message stays on one line.
    ///
    /// - Parameter text: The text to escape.
    /// - Returns: The text with its dangerous characters as visible escapes.
    package static func escaped(_ text: String) -> String {
        var output = ""
        for scalar in text.unicodeScalars { appendEscaping(scalar, to: &output, keepingLineFeeds: false) }
        return output
    }

    /// `bytes` decoded as UTF-8 and ``escaped(_:)``, each byte that is not part of valid UTF-8
    /// shown as `\xff`.
    ///
    /// An invalid byte is always 0x80 or above, and an escaped control character always below, so
    /// the two read apart.
    ///
    /// - Parameter bytes: The bytes to show as text, such as a characteristic's value.
    /// - Returns: The text, escaped.
    package static func escaped(utf8 bytes: [UInt8]) -> String {
        var output = ""
        var offset = 0
        var iterator = bytes.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                appendEscaping(Unicode.UTF8.decode(encoded), to: &output, keepingLineFeeds: false)
                offset += encoded.count
            case .error(let length):
                for byte in bytes[offset..<offset + length] { output += "\\x" + hexDigits(UInt32(byte)) }
                offset += length
            case .emptyInput:
                return output
            }
        }
    }

    /// Whether `scalar` is one that ``escaped(_:)`` shows as an escape: a C0 or C1 control, DEL,
    /// or a bidirectional embedding, override or isolate character.
    static func needsEscaping(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// The last line of defence behind ``escaped(_:)``: every character that escapes, except the
    /// line feeds that separate the lines of a result, as an escape; backslashes untouched, so
    /// text already escaped is unchanged.
    static func neutralized(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { needsEscaping($0) && $0 != "\n" }) else { return text }
        var output = ""
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                output += "\\"
            } else {
                appendEscaping(scalar, to: &output, keepingLineFeeds: true)
            }
        }
        return output
    }

    private static func appendEscaping(_ scalar: Unicode.Scalar, to output: inout String, keepingLineFeeds: Bool) {
        if scalar == "\\" {
            output += "\\\\"
        } else if scalar == "\n" && keepingLineFeeds {
            output += "\n"
        } else if !needsEscaping(scalar) {
            output.unicodeScalars.append(scalar)
        } else if scalar.value < 0x80 {
            output += "\\x" + hexDigits(scalar.value)
        } else {
            output += "\\u{" + String(scalar.value, radix: 16) + "}"
        }
    }

    /// `value` (below 0x100) as two lowercase hex digits.
    private static func hexDigits(_ value: UInt32) -> String {
        (value < 0x10 ? "0" : "") + String(value, radix: 16)
    }
}

/// What a capturing ``Console`` was given, a line per element.
final class CapturedOutput: Sendable {
    private typealias Waiter = (matches: @Sendable (String) -> Bool, continuation: CheckedContinuation<String, Never>)

    private struct Lines {
        var out: [String] = []
        var error: [String] = []
        var waiters: [Waiter] = []
    }

    private let lines = Lock(Lines())

    /// The lines written to standard output.
    var out: [String] { lines.withLock { $0.out } }
    /// The lines written to standard error.
    var error: [String] { lines.withLock { $0.error } }

    func append(out text: String) {
        let woken = lines.withLock { lines -> [(CheckedContinuation<String, Never>, String)] in
            let added = Self.split(text)
            lines.out += added
            var woken: [(CheckedContinuation<String, Never>, String)] = []
            lines.waiters.removeAll { waiter in
                guard let line = added.first(where: waiter.matches) else { return false }
                woken.append((waiter.continuation, line))
                return true
            }
            return woken
        }
        for (continuation, line) in woken { continuation.resume(returning: line) }
    }

    func append(error text: String) { lines.withLock { $0.error += Self.split(text) } }

    /// The first line written to standard output that `matches`, waiting for it if need be.
    func firstLine(where matches: @escaping @Sendable (String) -> Bool) async -> String {
        await withCheckedContinuation { continuation in
            let line = lines.withLock { lines -> String? in
                if let line = lines.out.first(where: matches) { return line }
                lines.waiters.append((matches, continuation))
                return nil
            }
            if let line { continuation.resume(returning: line) }
        }
    }

    private static func split(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }
}
