package import Able
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
///
/// The module is the package's own, not a product: the `able` executable runs it, and the
/// package's other programs (`able-soak`) build their single command on its ``Command``,
/// arguments and console.
package enum AbleCommand {
    static let commands: [any Command.Type] = [
        DemoCommand.self, ScanCommand.self, InfoCommand.self, ReadCommand.self, WriteCommand.self,
        NotifyCommand.self, ServeCommand.self, AdvertiseCommand.self, L2CAPCommand.self, DevicesCommand.self,
        ForgetCommand.self, PairCommand.self,
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
    package static func run(_ arguments: [String]) async -> Int32 {
        let json = arguments.contains("--json")
        return await run(arguments, context: .system(console: .standard(json: json)))
    }

    /// Runs the command line `arguments` like ``run(_:)``, with Ctrl-C (`SIGINT`) and `SIGTERM`
    /// cancelling the command: its scan stops, its subscriptions end and its connections close,
    /// then the status is 130. A second signal exits at once.
    package static func runInterruptibly(_ arguments: [String]) async -> Int32 {
        await interruptibly(program: "able") { await run(arguments) }
    }

    /// Runs `work`, with Ctrl-C (`SIGINT`) and `SIGTERM` cancelling it, and returns its status; a
    /// second signal exits at once with status 130. `program` names the process in the message
    /// the first signal prints.
    package static func interruptibly(
        program: String, _ work: @escaping @Sendable () async -> Int32
    ) async -> Int32 {
        let task = Task { await work() }
        let sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if task.isCancelled { exit(Status.interrupted) }
                Console.standard().error("\(program): stopping (Ctrl-C again to exit at once)")
                task.cancel()
            }
            source.resume()
            return source
        }
        let status = await task.value
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
        return await run(type, arguments.dropFirst(), context: context)
    }

    /// Runs the command `type` with `arguments` (its options and positionals) in `context` and
    /// returns the exit status; messages name the command as its spec's
    /// ``CommandSpec/invocation`` does.
    package static func run(
        _ type: any Command.Type, _ arguments: ArraySlice<String>, context: CommandContext
    ) async -> Int32 {
        let console = context.console
        let invocation = type.spec.invocation
        let command: any Command
        do {
            let parsed = try type.spec.parse(arguments)
            if parsed.wantsHelp {
                console.writeOut(type.spec.usage)
                return Status.success
            }
            command = try type.init(parsed)
        } catch {
            console.error("\(invocation): \(error.message)\n\n\(type.spec.usage)")
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
            console.error("\(invocation): \(Console.escaped(describe(error)))")
            return Status.failure
        } catch let error as UsageError {
            console.error("\(invocation): \(error.message)")
            return Status.usage
        } catch {
            console.error("\(invocation): \(Console.escaped("\(error)"))")
            return Status.failure
        }
    }

    /// A ``BluetoothError`` as the commands print it: its message, its code and, when BlueZ gave
    /// one, the error name. The message can carry BlueZ's or a device's words: text output
    /// passes it through ``Console/escaped(_:)``.
    package static func describe(_ error: BluetoothError) -> String {
        var text = "\(error.message) [\(error.code)]"
        if let errorName = error.errorName { text += " (\(errorName))" }
        return text
    }
}
