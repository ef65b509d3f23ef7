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
    package func result(_ text: @autoclosure () -> String, json object: @autoclosure () -> JSON) {
        writeOut(json ? object().text : text())
    }

    /// Prints a line of progress on standard error, in text mode only.
    package func progress(_ text: String) {
        if !json { writeError(text) }
    }

    /// Prints an error on standard error, in both modes.
    package func error(_ text: String) {
        writeError(text)
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
