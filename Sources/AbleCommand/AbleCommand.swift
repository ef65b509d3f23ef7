import Able
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// The `able` command: the demo, and small tools for real BlueZ adapters.
///
/// ```
/// able demo                      the seed scenario on the simulated radio
/// able scan --timeout 5 --json   what hci0 sees, as JSON Lines
/// ```
///
/// Exit status: 0 on success, 1 when the work failed (the error is printed), 64 for a command
/// line that does not fit (with the usage), 130 when interrupted (Ctrl-C).
public enum AbleCommand {
    static let commands: [any Command.Type] = [
        DemoCommand.self, ScanCommand.self, InfoCommand.self, ReadCommand.self, WriteCommand.self,
        NotifyCommand.self, ServeCommand.self, AdvertiseCommand.self, L2CAPCommand.self, DevicesCommand.self,
        ForgetCommand.self, PairCommand.self, SoakCommand.self,
    ]

    /// The subcommands' names, in the order the usage lists them.
    static let commandNames = commands.map { $0.spec.name }

    /// Exit statuses.
    enum Status {
        static let success: Int32 = 0
        static let failure: Int32 = 1
        static let usage: Int32 = 64
        static let interrupted: Int32 = 130
    }

    static var usage: String {
        var lines = ["Usage: able <command> [options]", "", "Commands:"]
        for command in commands {
            lines.append("  \(command.spec.name)".padding(to: 12) + command.spec.summary)
        }
        lines += ["", "Run 'able <command> --help' for a command's options."]
        return lines.joined(separator: "\n")
    }

    /// Runs the command line `arguments` (without the program name) on the system's BlueZ, and
    /// returns the exit status.
    public static func run(_ arguments: [String]) async -> Int32 {
        let json = arguments.contains("--json")
        return await run(arguments, context: .system(console: .standard(json: json)))
    }

    /// Runs the command line `arguments` like ``run(isolation:_:)``, with Ctrl-C (`SIGINT`) and `SIGTERM`
    /// cancelling the command: its scan stops, its subscriptions end and its connections close,
    /// then the status is 130. A second signal exits at once.
    public static func runInterruptibly(_ arguments: [String]) async -> Int32 {
        let work = Task { await run(arguments) }
        let sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if work.isCancelled { exit(Status.interrupted) }
                Console.standard().error("able: stopping (Ctrl-C again to exit at once)")
                work.cancel()
            }
            source.resume()
            return source
        }
        let status = await work.value
        for source in sources { source.cancel() }
        return status
    }

    /// Runs the command line `arguments` in `context` and returns the exit status.
    static func run(_ arguments: [String], context: CommandContext) async -> Int32 {
        let console = context.console
        guard let name = arguments.first else {
            console.error(usage)
            return Status.usage
        }
        if name == "-h" || name == "--help" || name == "help" {
            console.writeOut(usage)
            return Status.success
        }
        guard let type = commands.first(where: { $0.spec.name == name }) else {
            console.error("able: unknown command '\(name)'\n\n\(usage)")
            return Status.usage
        }
        let command: any Command
        do {
            let parsed = try type.spec.parse(arguments.dropFirst())
            if parsed.wantsHelp {
                console.writeOut(type.spec.usage)
                return Status.success
            }
            command = try type.init(parsed)
        } catch {
            console.error("able \(name): \(error.message)\n\n\(type.spec.usage)")
            return Status.usage
        }
        do {
            try await command.run(in: context)
            return Task.isCancelled ? Status.interrupted : Status.success
        } catch is CancellationError {
            return Status.interrupted
        } catch  where Task.isCancelled {
            return Status.interrupted
        } catch let error as BluetoothError {
            console.error("able \(name): \(describe(error))")
            return Status.failure
        } catch let error as UsageError {
            console.error("able \(name): \(error.message)")
            return Status.usage
        } catch {
            console.error("able \(name): \(error)")
            return Status.failure
        }
    }

    static func describe(_ error: BluetoothError) -> String {
        var text = "\(error.message) [\(error.code)]"
        if let errorName = error.errorName { text += " (\(errorName))" }
        return text
    }
}
