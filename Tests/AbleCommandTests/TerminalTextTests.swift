import Able
import AbleSimulator
import Foundation
import Testing

@testable import AbleCommand

/// How `able` shows text it did not write: the escaping function, the JSON writer, the console's
/// last line of defence, values shown as text, and error messages.
@Suite("Text from elsewhere, made safe for a terminal")
struct TerminalTextTests {
    @Test(
        "Controls, escape sequences, C1 controls, bidirectional overrides and backslashes become visible escapes",
        arguments: [
            ("\u{1B}]0;pwned\u{07}", #"\x1b]0;pwned\x07"#),
            ("\u{1B}[2J", #"\x1b[2J"#),
            ("a\rb\nc\td\u{0}", #"a\x0db\x0ac\x09d\x00"#),
            ("del\u{7F}", #"del\x7f"#),
            ("\u{9B}31m\u{85}\u{80}\u{9F}", #"\u{9b}31m\u{85}\u{80}\u{9f}"#),
            ("abc\u{202E}fed\u{202A}\u{202B}\u{202C}\u{202D}", #"abc\u{202e}fed\u{202a}\u{202b}\u{202c}\u{202d}"#),
            ("\u{2066}\u{2067}\u{2068}\u{2069}", #"\u{2066}\u{2067}\u{2068}\u{2069}"#),
            (#"C:\path\x1b"#, #"C:\\path\\x1b"#),
        ] as [(String, String)])
    func escapes(text: String, escaped: String) {
        #expect(Console.escaped(text) == escaped)
        #expect(Console.escaped(utf8: Array(text.utf8)) == escaped)
    }

    @Test(
        "Printable Unicode stays as it is",
        arguments: ["", "plain ASCII", "Café Ñandú", "東京の温度計", "🔋 battery 🌡️", "\u{A0}no-break", "שלום", "x\u{301}"])
    func keepsPrintableText(text: String) {
        #expect(Console.escaped(text) == text)
        #expect(Console.escaped(utf8: Array(text.utf8)) == text)
    }

    @Test(
        "Bytes that are not valid UTF-8 show as \\x escapes, and the valid text around them stays",
        arguments: [
            ([0x68, 0x69, 0xFF], #"hi\xff"#),
            ([0xC3], #"\xc3"#),
            ([0xC3, 0x28], #"\xc3("#),
            ([0xC0, 0xAF], #"\xc0\xaf"#),
            ([0xED, 0xA0, 0x80], #"\xed\xa0\x80"#),
            ([0xF4, 0x90, 0x80, 0x80], #"\xf4\x90\x80\x80"#),
            ([0x80, 0x1B, 0x5B, 0x32, 0x4A, 0xC3, 0xA9], #"\x80\x1b[2Jé"#),
            ([0x5C, 0x78, 0x66, 0x66], #"\\xff"#),
        ] as [([UInt8], String)])
    func escapesInvalidUTF8(bytes: [UInt8], escaped: String) {
        #expect(Console.escaped(utf8: bytes) == escaped)
    }

    @Test("JSON escapes controls as \\u00XX, and DEL, C1 controls and bidirectional overrides too, and stays valid")
    func jsonEscapes() throws {
        let text = "\u{1B}]0;x\u{07}\u{7F}\u{9B}\u{202E}\u{2066}\\\"é東\n"
        let json = JSON.string(text).text
        #expect(json == #""\u001b]0;x\u0007\u007f\u009b\u202e\u2066\\\"é東\n""#)
        let decoded = try JSONSerialization.jsonObject(with: Data("[\(json)]".utf8)) as? [String]
        #expect(decoded == [text])
    }

    @Test("The console escapes what a command forgot to, keeping the lines of a result")
    func consoleNeutralizes() {
        let (console, output) = Console.capturing()
        console.result("one \u{1B}[2J\ntwo \u{202E}\\x41", json: .null)
        console.progress("progress \u{1B}]0;pwned\u{07}")
        console.error("error \u{9B}1m")
        #expect(output.out == [#"one \x1b[2J"#, #"two \u{202e}\x41"#])
        #expect(output.error == [#"progress \x1b]0;pwned\x07"#, #"error \u{9b}1m"#])
    }

    @Test(
        "A value shows as text, escaped, when most of its bytes are printable text",
        arguments: [
            (Array("hi".utf8), #"6869 "hi""#, "hi"),
            ([0x01], "01", nil),
            ([0x06, 0x48], "0648", nil),
            ([], "", nil),
            (Array("hello".utf8) + [0xFF, 0x1B], #"68656c6c6fff1b "hello\xff\x1b""#, nil),
            (Array("ok\u{1B}[2J".utf8), #"6f6b1b5b324a "ok\x1b[2J""#, "ok\u{1B}[2J"),
        ] as [([UInt8], String, String?)])
    func valuesAsText(value: [UInt8], described: String, jsonText: String?) {
        #expect(value.described == described)
        #expect(value.jsonText == jsonText)
    }

    /// A command that fails with an error carrying text a device could have chosen.
    struct HostileFailure: Command {
        static let spec = CommandSpec(
            name: "hostile", summary: "fail with a device's words", positionals: ["KIND"], options: [CommandSpec.json])

        struct Untyped: Error, CustomStringConvertible {
            var description: String { "untyped \u{1B}]0;pwned\u{07}\nline" }
        }

        var kind: String

        init(_ arguments: ParsedArguments) { kind = arguments.positionals[0] }

        func run(in context: CommandContext) async throws {
            if kind == "bluetooth" {
                throw BluetoothError(.failed, message: "\"\u{1B}]0;pwned\u{07}\u{202E}\" went away\nsecond line")
            }
            throw Untyped()
        }
    }

    @Test(
        "An error's message is one escaped line on standard error, in text and JSON modes",
        arguments: [
            ("bluetooth", #"able hostile: "\x1b]0;pwned\x07\u{202e}" went away\x0asecond line ["#),
            ("other", #"able hostile: untyped \x1b]0;pwned\x07\x0aline"#),
        ] as [(String, String)], [false, true])
    func errorMessages(failure: (kind: String, expected: String), json: Bool) async {
        let (kind, expected) = failure
        let (console, output) = Console.capturing(json: json)
        let context = CommandContext(
            console: console, adapter: { _ in throw CancellationError() }, simulatedPair: SimulatedPair.make)
        let status = await AbleCommand.run(HostileFailure.self, [kind] + (json ? ["--json"] : []), context: context)
        #expect(status == 1)
        #expect(output.error.count == 1, "\(output.error)")
        #expect(output.error.first?.hasPrefix(expected) == true, "\(output.error)")
        #expect(output.out.isEmpty)
    }
}
