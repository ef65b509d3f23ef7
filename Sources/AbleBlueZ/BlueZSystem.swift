import Able
package import AbleDBus
import AbleStreams

/// The process's connection to BlueZ on the system bus and its object tree, shared by every
/// adapter and peripheral: the tree is loaded once, never per call.
package final class BlueZSystem: Sendable {
    let connection: DBusConnection
    let tree: BlueZObjectTree
    let discovery: BlueZDiscoveryCoordinator
    let notifications = BlueZNotificationHub()
    /// The characteristics' acquired write sockets (`AcquireWrite`), by characteristic path.
    let writeSockets = AcquiredSocketTable<DBusObjectPath>()
    /// The process's pairing agent: standing agents and those of pairings under way.
    let agents = BlueZAgentRegistry()

    static let service = "org.bluez"
    private static let sharedSystem = Lock<BlueZSystem?>(nil)

    private init(connection: DBusConnection, tree: BlueZObjectTree) {
        self.connection = connection
        self.tree = tree
        self.discovery = BlueZDiscoveryCoordinator()
    }

    /// Opens a system on a given connection (tests use a private bus with a fake BlueZ).
    package static func open(on connection: DBusConnection) async throws -> BlueZSystem {
        BlueZSystem(connection: connection, tree: try await BlueZObjectTree.start(on: connection, service: service))
    }

    /// The shared system, connecting to the system bus the first time.
    static func shared() async throws -> BlueZSystem {
        if let system = sharedSystem.withLock({ $0 }), await system.connection.isConnected { return system }
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: .system)
        } catch {
            throw BluetoothError(.daemonUnavailable, message: "cannot reach the system bus", cause: error)
        }
        let system = try await open(on: connection)
        return sharedSystem.withLock { shared in
            if let existing = shared { return existing }
            shared = system
            return system
        }
    }

    /// Calls a BlueZ method, turning D-Bus errors into ``BluetoothError``.
    func call(
        _ path: DBusObjectPath, _ interface: String, _ method: String, _ arguments: [DBusValue] = [],
        timeout: Duration? = .seconds(25)
    ) async throws -> [DBusValue] {
        do {
            return try await connection.call(
                destination: Self.service, path: path, interface: interface, method: method, arguments: arguments,
                timeout: timeout)
        } catch let error as DBusError {
            throw BluetoothError(dbusError: error)
        }
    }

    /// Calls a BlueZ method from a task of its own, which the caller's cancellation does not
    /// reach, and waits for it; the answer, error or not, is dropped. For undoing in BlueZ what a
    /// cancelled or failed operation may have started there (`Disconnect`, `StopNotify`, …).
    func callEvenIfCancelled(
        _ path: DBusObjectPath, _ interface: String, _ method: String, _ arguments: [DBusValue] = []
    ) async {
        await runEvenIfCancelled { [self] in _ = try? await call(path, interface, method, arguments) }
    }

    func setProperty(_ path: DBusObjectPath, _ interface: String, _ name: String, _ value: DBusValue) async throws {
        _ = try await call(
            path, "org.freedesktop.DBus.Properties", "Set", [.string(interface), .string(name), .variant(value)])
    }
}

extension BluetoothError {
    /// Maps a D-Bus error: `org.bluez.Error.*` names through ``fromBlueZ(name:message:cause:file:line:)``,
    /// the bus's own errors to the codes that describe them.
    init(dbusError error: DBusError, file: String = #fileID, line: Int = #line) {
        let name = error.name.rawValue
        if name.hasPrefix("org.bluez.Error.") {
            self = .fromBlueZ(name: name, message: error.message, cause: error, file: file, line: line)
            return
        }
        // With bluetoothd stopped, a call to org.bluez makes the bus try to start it by D-Bus
        // activation (Debian's org.bluez.service); when that fails the caller gets
        // `org.freedesktop.DBus.Error.Spawn.*` (for example `Spawn.ChildExited`, "Launch helper
        // exited with unknown return code 1"), which says only that bluetoothd is not running.
        if name.hasPrefix("org.freedesktop.DBus.Error.Spawn.") {
            self.init(.daemonUnavailable, message: error.message, cause: error, errorName: nil, file: file, line: line)
            return
        }
        let code: Code =
            switch error.name {
            case .noReply, .timeout: .timeout
            case .disconnected: .daemonUnavailable
            case .serviceUnknown, .nameHasNoOwner: .daemonUnavailable
            case .unknownObject, .unknownMethod, .unknownInterface, .unknownProperty: .doesNotExist
            case .invalidArgs: .protocolError
            case .accessDenied: .notPermitted
            default: .failed
            }
        self.init(code, message: error.message, cause: error, errorName: nil, file: file, line: line)
    }
}

extension DBusObjectPath {
    /// A fresh path for an object Able exports, `prefix` followed by 32 random hex digits, so
    /// that two servers, advertisements or agents of one process never collide.
    static func unique(_ prefix: String) -> DBusObjectPath {
        var generator = SystemRandomNumberGenerator()
        let suffix = (0..<2).map { _ in Hex.format(generator.next() as UInt64, digits: 16) }.joined()
        return DBusObjectPath(rawValue: prefix + suffix)!
    }
}
