package import Able
import AbleSimulator
import Synchronization

/// One of `able`'s subcommands: its spec, how it reads its arguments and what it does.
package protocol Command: Sendable {
    static var spec: CommandSpec { get }
    /// Reads the parsed arguments; throws a ``UsageError`` for a value that does not parse.
    init(_ arguments: ParsedArguments) throws(UsageError)
    /// Does the work, printing through `context.console`. Cancellation (Ctrl-C) must stop it
    /// cleanly: scans stopped, subscriptions and connections closed.
    func run(in context: CommandContext) async throws
}

/// What commands work with: where their output goes and how they get adapters.
package struct CommandContext: Sendable {
    package var console: Console
    /// Opens the adapter named by `--adapter`, or the default one for `nil`.
    package var adapter: @Sendable (String?) async throws -> Adapter
    /// Two adapters on a new simulated radio, for `able demo`, and the radio's leak report.
    var simulatedPair: @Sendable () -> SimulatedPair

    /// The real system: BlueZ on the system bus.
    package static func system(console: Console) -> CommandContext {
        CommandContext(
            console: console,
            adapter: { name in
                if let name { try await Adapter.named(name) } else { try await Adapter.default() }
            },
            simulatedPair: SimulatedPair.make)
    }
}

/// A server and a central adapter on one simulated radio.
struct SimulatedPair: Sendable {
    var server: Adapter
    var central: Adapter
    /// What is still open on the radio (``SimulatedRadio/openResources``).
    var openResources: @Sendable () -> [String]
    /// The radio's clock, whose ``SimulatedClock/run(isolation:_:)`` runs the work on the radio.
    var clock: SimulatedClock

    static func make() -> SimulatedPair {
        let radio = SimulatedRadio()
        return SimulatedPair(
            server: radio.makeAdapter(name: "sim-server"), central: radio.makeAdapter(name: "sim-central"),
            openResources: { radio.openResources }, clock: radio.clock)
    }
}

/// Connects to the peripheral at `address` (scanning for it first when the adapter has not seen
/// it), runs `body`, and disconnects, whatever `body` does.
func withConnection<T>(
    to address: BluetoothAddress, on adapter: Adapter, timeout: Duration, console: Console,
    isolation: isolated (any Actor)? = #isolation, _ body: (Peripheral) async throws -> sending T
) async throws -> sending T {
    var peripheral = adapter.peripheral(address: address)
    console.progress("connecting to \(address) on \(adapter.name)…")
    do {
        try await peripheral.connect(timeout: timeout)
    } catch let error as BluetoothError where error.code == .doesNotExist {
        console.progress("scanning for \(address)…")
        let scan = try await adapter.scan()
        let found = try await withDeadline(timeout, what: "finding \(address)", sleep: adapter.sleep(for:)) {
            for try await discovery in scan where discovery.address == address { return discovery }
            throw CancellationError()
        }
        peripheral = adapter.peripheral(for: found)
        try await peripheral.connect(timeout: timeout)
    }
    return try await peripheral.disconnecting(after: body)
}

/// Finds the characteristic `uuid` among the peripheral's services (in `service` when given).
func characteristic(
    _ uuid: BluetoothUUID, service: BluetoothUUID?, of peripheral: Peripheral
) async throws -> CharacteristicID {
    let matches = try await peripheral.services()
        .filter { service == nil || $0.uuid == service }
        .flatMap(\.characteristics)
        .filter { $0.uuid == uuid }
    guard let first = matches.first else {
        throw BluetoothError(
            .doesNotExist,
            message: "\(peripheral.address) has no characteristic \(uuid)\(service.map { " in service \($0)" } ?? "")")
    }
    guard matches.count == 1 else {
        throw BluetoothError(
            .invalidArguments,
            message:
                "\(uuid) is in \(matches.count) services (\(matches.map { "\($0.serviceUUID)" }.joined(separator: ", "))): name one with --service"
        )
    }
    return CharacteristicID(first.uuid, service: first.serviceUUID)
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension Array where Element == UInt8 {
    /// The bytes as lowercase hex, two digits each, no separators.
    var hex: String { Hex.string(self) }

    /// Whether the bytes read as text: more than half of them encode, as valid UTF-8, characters
    /// that print (not the controls and bidirectional characters ``Console/escaped(_:)`` escapes).
    var isMostlyText: Bool {
        var printable = 0
        var iterator = makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                if !Console.needsEscaping(Unicode.UTF8.decode(encoded)) { printable += encoded.count }
            case .error: continue
            case .emptyInput: return printable * 2 > count
            }
        }
    }

    /// The bytes for people: hex, then, when they are mostly text, the text in quotes with its
    /// controls and invalid bytes escaped (``Console/escaped(utf8:)``), such as `68690a "hi\x0a"`.
    var described: String {
        hex + (isMostlyText ? " \"\(Console.escaped(utf8: self))\"" : "")
    }

    /// The bytes as the `text` of their JSON: the string they encode when they are mostly text and
    /// all valid UTF-8 (the JSON writer escapes its controls), else `nil`.
    var jsonText: String? {
        guard isMostlyText else { return nil }
        return String(validating: self, as: UTF8.self)
    }

    /// Parses hex such as `0a1b`, `0A:1B` or `0a 1b`.
    init?(hex text: String) {
        let digits = text.filter { $0 != ":" && $0 != " " && $0 != "-" }
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self = bytes
    }
}

extension JSON {
    /// A value as `{"hex": …, "text": …}`, the text only when the bytes are mostly text and valid
    /// UTF-8 (``Swift/Array/jsonText``).
    static func bytes(_ value: [UInt8]) -> JSON {
        .object([("hex", .string(value.hex)), ("text", .optional(value.jsonText) { .string($0) })])
    }
}

/// A count shared between a task and the code that waits for it.
final class Counter: Sendable {
    private let storage = Atomic<Int>(0)

    var value: Int { storage.load(ordering: .relaxed) }

    /// Adds one and returns the new count.
    @discardableResult
    func increment() -> Int { storage.add(1, ordering: .relaxed).newValue }
}
