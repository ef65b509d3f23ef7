import Able
import Testing

@testable import AbleCommand
@testable import AbleSoak

/// `able-soak`'s command line, run in-process with a context whose adapters must never be asked for.
@Suite("able-soak's command line")
struct SoakArgumentTests {
    func run(_ arguments: [String]) async -> (status: Int32, output: CapturedOutput) {
        let (console, output) = Console.capturing()
        let context = CommandContext(
            console: console,
            adapter: { _ in throw BluetoothError(.failed, message: "argument tests open no adapter") },
            simulatedPair: SimulatedPair.make)
        return (await AbleCommand.run(SoakCommand.self, arguments[...], context: context), output)
    }

    @Test(
        "A command line that does not fit gets the program's name, the reason, the usage and status 64",
        arguments: [
            (["--role", "peripheral"], "able-soak: --role must be central or server, not 'peripheral'"),
            (["--duration", "0"], "able-soak: --duration must be a number of seconds above 0, not '0'"),
            (["--max-stall", "soon"], "able-soak: --max-stall must be a number of seconds above 0, not 'soon'"),
            (["--adapter", "hci0/../hci1"], "able-soak: --adapter: 'hci0/../hci1' is not an adapter name"),
            (["soak"], "able-soak: unexpected argument 'soak'"),
        ] as [([String], String)])
    func badCommandLines(arguments: [String], message: String) async {
        let (status, output) = await run(arguments)
        #expect(status == 64)
        #expect(output.out.isEmpty)
        #expect(output.error.first?.hasPrefix(message) == true, "\(output.error)")
        #expect(output.error.contains("Usage: able-soak [options]"), "\(output.error)")
    }

    @Test("--help prints the usage with every option on standard output and succeeds")
    func help() async {
        let (status, output) = await run(["--help"])
        #expect(status == 0)
        #expect(output.out.first == "Usage: able-soak [options]")
        for option in ["--role ROLE", "--adapter NAME", "--server ADDRESS|NAME", "--duration", "--max-stall", "--json"]
        {
            #expect(output.out.contains { $0.hasPrefix("  \(option)") }, "\(option)")
        }
        #expect(output.error.isEmpty)
    }

    @Test("A failure to open the adapter is reported in one line with status 1")
    func workFailure() async {
        let (status, output) = await run(["--server", "AA:BB:CC:DD:EE:FF", "--duration", "1"])
        #expect(status == 1)
        #expect(output.error == ["able-soak: argument tests open no adapter [failed]"])
    }
}
