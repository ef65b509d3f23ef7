import Able
import AbleCommand

/// `able-soak`: one side of the soak with faults (issue #20) that `Scripts/soak` runs in the
/// QEMU guest. A test tool of the package's own, not part of the `able` command users install.
///
/// `able-soak --role server` serves ``SoakServer`` on its adapter until stopped (the soak kills
/// and restarts it on purpose); at start it waits up to a minute for `bluetoothd` and the
/// adapter. `able-soak` (the central) works a ``MaintainedConnection`` to the server for the
/// duration, as ``SoakCentral`` describes, while `Scripts/bluez-vm/guest-soak` injects the
/// faults; then it prints what it counted and measured and fails (status 1) when a criterion is
/// not met:
///
/// - every error is a ``BluetoothError`` (an untyped one fails);
/// - no value is lost or duplicated on a path that survived (a link, a channel);
/// - each of reads, writes, notifications and L2CAP echoes completed at least once;
/// - resident memory at the end is less than 10 % above the most it was in the first half, a
///   quarter of the way or in the middle (the first half is the warm-up; see
///   ``SoakReport/allowedGrowth``), and the open file descriptors are back to
///   the baseline, libdispatch's timerfds aside (``SoakReport/dispatchClocks``);
/// - no stall (time without a completed read, write, notification or echo) is longer than
///   `--max-stall`.
struct SoakCommand: Command {
    static let spec = CommandSpec(
        name: "able-soak", summary: "one side of the soak with faults that Scripts/soak runs", positionals: [],
        options: [
            .init(name: "role", value: "ROLE", help: "central (default) or server"),
            .init(
                name: "adapter", value: "NAME",
                help: "this side's adapter (default hci0 for the central, hci1 for the server)"),
            .init(
                name: "server", value: "ADDRESS|NAME",
                help: "central: the server's address, or its adapter's name (default hci1)"),
            .init(name: "duration", value: "SECONDS", help: "central: how long to work (default 600)"),
            .init(name: "max-stall", value: "SECONDS", help: "central: the longest stall that passes (default 60)"),
            CommandSpec.json,
        ],
        details: """
            The server serves a counter notified every 250 ms and a value to write and read back, and
            echoes L2CAP SDUs on PSM \(SoakServer.psm.rawValue); it registers again after bluetoothd restarts.
            The central keeps it connected with a maintained connection, writes, reads, echoes and takes
            notifications without pause, scans beside it, then prints operations and errors per kind,
            values lost or duplicated, memory and file descriptors, and the longest stall. Exit status 1
            when a criterion fails; 130 when stopped by SIGINT or SIGTERM.
            """,
        isProgram: true)

    enum Role: String { case central, server }

    var role: Role
    var adapter: String
    var server: String
    var duration: Duration
    var maximumStall: Duration

    init(_ arguments: ParsedArguments) throws(UsageError) {
        let roleName = arguments.string("role") ?? "central"
        guard let role = Role(rawValue: roleName) else {
            throw UsageError("--role must be central or server, not '\(roleName)'")
        }
        self.role = role
        adapter = try arguments.adapterName() ?? (role == .central ? "hci0" : "hci1")
        server = arguments.string("server") ?? "hci1"
        duration = try arguments.seconds("duration", default: .seconds(600))
        maximumStall = try arguments.seconds("max-stall", default: .seconds(60))
    }

    func run(in context: CommandContext) async throws {
        let console = context.console
        switch role {
        case .server:
            let adapter = try await Self.whenAvailable(self.adapter, in: context)
            try await SoakServer(adapter: adapter, console: console).run()
        case .central:
            let adapter = try await context.adapter(self.adapter)
            let address: BluetoothAddress
            if let given = BluetoothAddress(server) {
                address = given
            } else {
                guard let found = await (try context.adapter(server)).state.address else {
                    throw BluetoothError(.notReady, message: "adapter \(server) has no address")
                }
                address = found
            }
            console.result(
                "soak: \(duration) on \(adapter.name) against \(address)",
                json: .object([("event", "start"), ("seconds", .double(duration.seconds))]))
            let central = SoakCentral(adapter: adapter, serverAddress: address, console: console)
            let samples = await central.run(for: duration)
            let report = SoakReport(ledger: central.ledger, samples: samples, maximumStall: maximumStall)
            for line in report.lines {
                console.result(Console.escaped(line), json: .object([("report", .string(line))]))
            }
            guard report.failures.isEmpty else {
                throw BluetoothError(.failed, message: "the soak failed: \(report.failures.joined(separator: "; "))")
            }
        }
    }

    /// How long the server waits at start for `bluetoothd` and its adapter.
    static let startWait = Duration.seconds(60)

    /// The adapter `name`, waiting up to ``startWait`` while `bluetoothd` is away or has not
    /// registered it yet: the soak starts the server again at any moment, a `bluetoothd`
    /// restart included, as a system starts a server at boot.
    private static func whenAvailable(_ name: String, in context: CommandContext) async throws -> Adapter {
        let deadline = ContinuousClock.now.advanced(by: startWait)
        var said = false
        while true {
            do {
                return try await context.adapter(name)
            } catch let error as BluetoothError
                where [.daemonUnavailable, .doesNotExist].contains(error.code) && ContinuousClock.now < deadline
            {
                if !said {
                    context.console.progress("server: waiting for \(name): \(Console.escaped(error.message))")
                    said = true
                }
                try await Task.sleep(for: .milliseconds(500))
            }
        }
    }
}
