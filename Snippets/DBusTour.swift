// A tour of AbleDBus, the D-Bus layer under Able: export an object, call it, watch its signals,
// and, on the system bus, list BlueZ's adapters.
//
// Run it with `Scripts/demo` (a private bus) or `Scripts/demo --bluez` (real BlueZ in the QEMU
// guest), or directly: `swift run DBusTour [--system | D-Bus address]`.
import AbleDBus

let argument = CommandLine.arguments.dropFirst().first
let bus: DBusConnection.Bus =
    switch argument {
    case "--system": .system
    case let address?: .address(address)
    case nil: .session
    }
let clock = ContinuousClock()
let start = clock.now
func say(_ line: String) {
    let (seconds, attoseconds) = (clock.now - start).components
    let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
    print("[\(milliseconds) ms] \(line)")
}

let server = try await DBusConnection.connect(to: bus)
let client = try await DBusConnection.connect(to: bus)
say("connected to the \(bus) as \(server.uniqueName) and \(client.uniqueName)")

// 1. Export an object whose method answers with a greeting and emits a signal.
let path: DBusObjectPath = "/org/example/Greeter"
try await server.export(
    [
        DBusInterface(
            "org.example.Greeter",
            methods: [
                DBusMethod("Greet", in: "s", out: "s") { [server] call in
                    let name = try call.argument(0, as: String.self)
                    try server.emitSignal(
                        path: path, interface: "org.example.Greeter", member: "Greeted", arguments: [.string(name)])
                    return [.string("Hello, \(name)! You are \(call.sender).")]
                }
            ],
            properties: [.constant("Language", "en")],
            signals: [DBusSignalDeclaration("Greeted", signature: "s")])
    ], at: path)
say("exported \(path)")

// 2. Subscribe first, then call: the signal cannot be missed.
let greetings = try await client.signals(matching: DBusMatchRule(path: path, interface: "org.example.Greeter"))
let reply = try await client.call(
    destination: server.uniqueName, path: path, interface: "org.example.Greeter", method: "Greet",
    arguments: [.string("Able")])
say("Greet replied: \(try reply[0].decode(String.self))")
for try await signal in greetings {
    say("signal \(signal.member)(\(try signal.arguments[0].decode(String.self)))")
    break
}

// 3. Properties come for free.
let language = try await client.call(
    destination: server.uniqueName, path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
    arguments: [.string("org.example.Greeter"), .string("Language")])
say("property Language = \(language[0].unwrappingVariant)")

// 4. On the system bus, BlueZ's adapters.
if case "--system" = argument {
    let objects = try await client.call(
        destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
        method: "GetManagedObjects")[0].decode([DBusObjectPath: [String: [String: DBusVariant]]].self)
    for (adapterPath, interfaces) in objects.sorted(by: { $0.key < $1.key }) {
        guard let adapter = interfaces["org.bluez.Adapter1"] else { continue }
        let address = try adapter.decode("Address", as: String.self) ?? "?"
        let powered = try adapter.decode("Powered", as: Bool.self) ?? false
        say("BlueZ adapter \(adapterPath): \(address), powered \(powered)")
    }
}

await client.close()
await server.close()
say("done")
