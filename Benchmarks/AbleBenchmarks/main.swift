// The Swift half of `Scripts/bench`: each command does, through Able or AbleDBus, what a C program
// in `Benchmarks/C` does through libdbus (`signals` is `signal-receiver.c`, `central-notifications`
// is `signal-receiver.c … notify`, `central-notify-socket` and `central-write-socket` are
// `socket-client.c`, `server-readvalue` is `gatt-server.c`; `l2cap` does through
// Able's L2CAPChannel what `l2cap-socketpair.c` does with plain sockets), and prints the same
// `result` line. `sim-cycle` has no C counterpart: it times the simulated radio alone.
// `gatt-server` and `gatt-central` run in the QEMU guest against real bluetoothd (`Scripts/bench
// gatt`): the central prints its own figure lines, against `gatt-reference.c`.
//
// To add a command, add an entry to `commands`: its name, its arguments after the name, and what
// it runs. Arguments are read with `integer(_:)`, `placement(_:)` and `signalConsumer(_:)`.
import Able

#if canImport(Glibc)
    import Glibc
#endif

struct Command {
    var name: String
    var arguments: [String]
    /// Runs the command; `nil` when it printed its own figures (or serves until killed).
    var run: ([String]) async throws -> Measurement?
}

let commands: [Command] = [
    Command(name: "call-sequential", arguments: ["ADDRESS", "N", "WARMUP", "global|shared"]) { a in
        try await runSequentialCalls(
            address: a[0], count: integer(a[1]), warmup: integer(a[2]), placement: placement(a[3]))
    },
    Command(name: "call-pipelined", arguments: ["ADDRESS", "N", "WINDOW", "WARMUP", "global|shared"]) { a in
        try await runPipelinedCalls(
            address: a[0], count: integer(a[1]), window: integer(a[2]), warmup: integer(a[3]),
            placement: placement(a[4]))
    },
    Command(name: "signals", arguments: ["ADDRESS", "N", "BUFFER_LIMIT", "global|shared|handler"]) { a in
        try await runSignals(
            address: a[0], count: integer(a[1]), bufferLimit: integer(a[2]), consumer: signalConsumer(a[3]))
    },
    Command(name: "central-notifications", arguments: ["ADDRESS", "N"]) { a in
        try await runCentralNotifications(address: a[0], count: integer(a[1]))
    },
    Command(name: "central-notifications-on-loop", arguments: ["ADDRESS", "N"]) { a in
        try await runCentralNotifications(address: a[0], count: integer(a[1]), consumer: .taskOnLoop)
    },
    Command(name: "central-notifications-handler", arguments: ["ADDRESS", "N"]) { a in
        try await runCentralNotifications(address: a[0], count: integer(a[1]), consumer: .handler)
    },
    Command(name: "central-notify-socket", arguments: ["ADDRESS", "N"]) { a in
        try await runCentralNotifications(address: a[0], count: integer(a[1]), delivery: .socket)
    },
    Command(name: "central-notify-socket-on-loop", arguments: ["ADDRESS", "N"]) { a in
        try await runCentralNotifications(
            address: a[0], count: integer(a[1]), delivery: .socket, consumer: .taskOnLoop)
    },
    Command(name: "central-notify-socket-handler", arguments: ["ADDRESS", "N"]) { a in
        try await runCentralNotifications(address: a[0], count: integer(a[1]), delivery: .socket, consumer: .handler)
    },
    Command(name: "central-write-socket", arguments: ["ADDRESS", "N", "single|sequence"]) { a in
        guard let style = SocketWriteStyle(rawValue: a[2]) else {
            print(usage)
            exit(2)
        }
        return try await runCentralWriteSocket(address: a[0], count: integer(a[1]), style: style)
    },
    Command(name: "server-readvalue", arguments: ["ADDRESS", "N", "WARMUP"]) { a in
        try await runServerReadValue(address: a[0], count: integer(a[1]), warmup: integer(a[2]))
    },
    Command(name: "l2cap", arguments: ["SIZE", "N", "WARMUP", "global|shared|batch"]) { a in
        guard let style = L2CAPSendStyle(rawValue: a[3]) else {
            print(usage)
            exit(2)
        }
        return try await runL2CAP(size: integer(a[0]), count: integer(a[1]), warmup: integer(a[2]), style: style)
    },
    Command(name: "event-floor", arguments: ["N", "dispatch|loop|poll"]) { a in
        try runEventFloor(count: integer(a[0]), mode: a[1])
    },
    Command(name: "sim-cycle", arguments: ["N", "WARMUP"]) { a in
        try await runSimulatorCycles(count: integer(a[0]), warmup: integer(a[1]))
    },
    Command(name: "gatt-server", arguments: ["ADAPTER"]) { a in
        try await runGATTServer(adapter: a[0])
    },
    Command(name: "gatt-central", arguments: ["ADAPTER", "N", "LARGE_N", "NOTIFICATIONS", "ROUNDS", "C_REFERENCE"]) {
        a in
        try await runGATTCentral(
            adapter: a[0], count: integer(a[1]), largeCount: integer(a[2]), notifications: integer(a[3]),
            rounds: max(integer(a[4]), 1), reference: a[5])
    },
]

let usage =
    "usage: "
    + commands.map { (["AbleBenchmarks", $0.name] + $0.arguments).joined(separator: " ") }
    .joined(separator: "\n       ")

func integer(_ text: String) -> Int {
    guard let value = Int(text), value >= 0 else {
        print(usage)
        exit(2)
    }
    return value
}

func placement(_ text: String) -> Placement {
    guard let placement = Placement(rawValue: text) else {
        print(usage)
        exit(2)
    }
    return placement
}

func signalConsumer(_ text: String) -> SignalConsumer {
    guard let consumer = SignalConsumer(rawValue: text) else {
        print(usage)
        exit(2)
    }
    return consumer
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = commands.first(where: { $0.name == arguments.first }),
    arguments.count == command.arguments.count + 1
else {
    print(usage)
    exit(2)
}
do {
    try await command.run(Array(arguments.dropFirst()))?.report()
} catch {
    var standardError = StandardError()
    print("AbleBenchmarks: \(error)", to: &standardError)
    exit(1)
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        var text = string
        text.withUTF8 { buffer in _ = Glibc.write(2, buffer.baseAddress, buffer.count) }
    }
}
