import AbleDBus
import AbleTestSupport

/// An object exported by tests: `Echo(v) -> v`, `Sleep(u ms)`, `Fail(s name, s message)`, `Wrong() -> s`
/// (declared to return `u`), and `TakeFD(h) -> s` which reads what the descriptor holds.
enum EchoService {
    static let path: DBusObjectPath = "/org/example/echo"
    static let interface = "org.example.Echo"

    static func interfaceDeclaration() -> DBusInterface {
        DBusInterface(
            interface,
            methods: [
                DBusMethod("Echo", in: "v", out: "v") { call in call.arguments },
                .immediate("EchoNow", in: "v", out: "v") { call in call.arguments },
                DBusMethod("Sleep", in: "u") { call in
                    try await Task.sleep(for: .milliseconds(Int(try call.argument(0, as: UInt32.self))))
                    return []
                },
                DBusMethod("Fail", in: "ss") { call in
                    throw DBusError(DBusError.Name(rawValue: try call.argument(0)), try call.argument(1))
                },
                DBusMethod("Wrong", out: "u") { _ in [.string("not a uint32")] },
                DBusMethod("Sender", out: "s") { call in [.string(call.sender)] },
            ])
    }

    static func call(
        _ connection: DBusConnection, on server: DBusConnection, _ method: String, _ arguments: [DBusValue] = [],
        timeout: Duration? = .seconds(25)
    ) async throws -> [DBusValue] {
        try await connection.call(
            destination: server.uniqueName, path: path, interface: interface, method: method, arguments: arguments,
            timeout: timeout)
    }
}

extension DBusConnection {
    /// How many match rules the bus daemon holds for this connection (`Debug.Stats`).
    func matchRuleCount() async throws -> UInt32 {
        let reply = try await call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus.Debug.Stats", method: "GetConnectionStats",
            arguments: [.string(uniqueName)])
        let stats = try reply[0].decode([String: DBusVariant].self)
        return try stats.decode("MatchRules", as: UInt32.self) ?? 0
    }
}
