import Able
import AbleSimulator
import Testing

@testable import AbleCommand

@Suite("able's command line")
struct ArgumentTests {
    /// Runs `able` in-process with a context whose adapters must never be asked for.
    func run(_ arguments: [String]) async -> (status: Int32, output: CapturedOutput) {
        let (console, output) = Console.capturing()
        let context = CommandContext(
            console: console,
            adapter: { _ in throw BluetoothError(.failed, message: "argument tests open no adapter") },
            simulatedPair: SimulatedPair.make)
        return (await AbleCommand.run(arguments, context: context), output)
    }

    @Test(
        "A command line that does not fit gets a short message, the usage and status 64",
        arguments: [
            ([], "Usage: able <command>"),
            (["fly"], "unknown command 'fly'"),
            // The soak is a program of its own (able-soak), not part of the command users install.
            (["soak"], "unknown command 'soak'"),
            (["scan", "--bogus"], "unknown option --bogus"),
            (["scan", "-x"], "unknown option -x"),
            (["scan", "--timeout"], "--timeout needs a value"),
            (["scan", "--timeout", "0"], "--timeout must be a number of seconds above 0"),
            (["scan", "--timeout", "soon"], "--timeout must be a number of seconds above 0, not 'soon'"),
            (["scan", "--count", "0"], "--count must be a whole number from 1"),
            (["scan", "--service", "heart"], "service 'heart' is not a UUID"),
            (["scan", "--json=yes"], "--json takes no value"),
            (["scan", "--adapter", "hci0", "--adapter", "hci1"], "--adapter is given twice"),
            (["scan", "extra"], "unexpected argument 'extra'"),
            (["info", "11:22:33"], "'11:22:33' is not a Bluetooth address"),
            (["read", "AA:BB:CC:DD:EE:FF"], "missing CHARACTERISTIC"),
            (["read", "AA:BB:CC:DD:EE:FF", "2a19", "--service", "nope"], "service 'nope' is not a UUID"),
            (["write", "AA:BB:CC:DD:EE:FF", "2a19", "0g"], "VALUE '0g' is not hex"),
            (["write", "AA:BB:CC:DD:EE:FF", "2a19", "123"], "VALUE '123' is not hex"),
            (["notify", "AA:BB:CC:DD:EE:FF", "2a19", "--count", "-1"], "--count must be a whole number"),
            (["serve", "--name", "a name far too long for an advert"], "--name must fit an advertisement"),
            (["advertise", "--manufacturer", "0xFFFF"], "--manufacturer must be ID=HEX"),
            (["advertise", "--manufacturer", "70000=01"], "--manufacturer must be ID=HEX"),
            (["advertise", "--service-data", "181A=0g"], "--service-data must be UUID=HEX"),
            (["advertise", "--interval", "10-20"], "--interval must be MIN-MAX in ms"),
            (["advertise", "--secondary", "3M"], "--secondary must be 1M, 2M or Coded"),
            (["advertise", "--appearance", "tall"], "--appearance must be a number"),
            (["scan", "--manufacturer", "apple"], "--manufacturer must be a company ID"),
            (["scan", "--passive"], "--passive needs --manufacturer"),
            (["l2cap"], "missing listen|connect"),
            (["l2cap", "dance"], "the mode is listen or connect, not 'dance'"),
            (["l2cap", "connect", "AA:BB:CC:DD:EE:FF"], "connect needs ADDRESS and PSM"),
            (["l2cap", "connect", "AA:BB:CC:DD:EE:FF", "0x1000"], "'0x1000' is not an LE PSM"),
            (["l2cap", "connect", "AA:BB:CC:DD:EE:FF", "0"], "connect needs the peer's PSM, not 0"),
            (["l2cap", "listen", "AA:BB:CC:DD:EE:FF"], "listen takes no ADDRESS or PSM"),
            (["demo", "--server", "hci0", "--central", "hci0"], "the server and the central need two adapters"),
            (["demo", "--notifications", "300"], "--notifications must be a whole number from 0 to 255"),
            (["serve", "--name", ""], "--name cannot be empty"),
            (["serve", "--pairing", "maybe"], "--pairing must be accept or refuse, not 'maybe'"),
            (["scan", "--adapter", ""], "--adapter: an adapter name cannot be empty"),
            (["scan", "--adapter", "hci0/../hci1"], "--adapter: 'hci0/../hci1' is not an adapter name"),
            (["info", "--adapter", "hci 0"], "--adapter: 'hci 0' is not an adapter name"),
            (["demo", "--server", "sim:0"], "--server: 'sim:0' is not an adapter name"),
            (["l2cap", "listen", "--adapter", "hci0\u{0}"], "is not an adapter name"),
            (["write", "AA:BB:CC:DD:EE:FF", "2a19", String(repeating: "ab", count: 513)], "VALUE has 513 bytes"),
            (
                ["write", "AA:BB:CC:DD:EE:FF", "2a19", "--text", String(repeating: "é", count: 257)],
                "VALUE has 514 bytes"
            ),
        ] as [([String], String)])
    func badCommandLines(arguments: [String], message: String) async {
        let (status, output) = await run(arguments)
        #expect(status == 64)
        #expect(output.out.isEmpty)
        let error = output.error.joined(separator: "\n")
        #expect(error.contains(message), "\(error)")
        #expect(error.contains("Usage: able"))
    }

    @Test("--help prints a command's usage on standard output and succeeds", arguments: AbleCommand.commandNames)
    func help(command: String) async {
        let (status, output) = await run([command, "--help"])
        #expect(status == 0)
        #expect(output.out.first?.hasPrefix("Usage: able \(command)") == true)
        #expect(output.out.contains { $0.hasPrefix("  --json") })
        #expect(output.error.isEmpty)
    }

    @Test("Options take their value inline or as the next argument, and -- ends the options")
    func parsing() throws {
        let parsed = try ScanCommand.spec.parse(["--timeout=2.5", "--service", "180f", "--service=180d", "--json"])
        #expect(parsed.string("timeout") == "2.5")
        #expect(parsed.strings("service") == ["180f", "180d"])
        #expect(parsed.flag("json"))
        let command = try ScanCommand(parsed)
        #expect(command.timeout == .milliseconds(2500))
        #expect(command.filter.serviceUUIDs == [.batteryService, .heartRate])

        let write = try WriteCommand(
            WriteCommand.spec.parse(["AA:BB:CC:DD:EE:FF", "2a19", "--text", "--", "--not-an-option"]))
        #expect(write.value == Array("--not-an-option".utf8))
        let hex = try WriteCommand(WriteCommand.spec.parse(["AA:BB:CC:DD:EE:FF", "2a19", "0a:1B:ff"]))
        #expect(hex.value == [0x0A, 0x1B, 0xFF])
    }

    @Test("A failure of the work itself is reported in one line with status 1, not a stack trace")
    func workFailure() async {
        let (status, output) = await run(["info"])
        #expect(status == 1)
        #expect(output.error == ["able info: argument tests open no adapter [failed]"])
    }

    @Test("JSON text escapes what it must and keeps the order of keys")
    func jsonText() {
        let value = JSON.object([
            ("b", .string("quote \" backslash \\ newline \n tab \t bell \u{07}")),
            ("a", .array([1, true, .null, .double(1.5)])),
        ])
        #expect(value.text == #"{"b":"quote \" backslash \\ newline \n tab \t bell \u0007","a":[1,true,null,1.5]}"#)
    }
}
