import AbleCore
package import AbleDBus
import AbleIO

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
    /// The GATT requests under way, failed when BlueZ leaves them unanswered after their link went down.
    let linkLoss = BlueZLinkLoss()

    /// The devices this process connected to as a central (`Device1.Connect`), until the link
    /// ends: a GATT server on the same adapter does not count them among its centrals, since
    /// `Device1` does not say which side made a link.
    ///
    /// A link BlueZ reported down stays listed for a few seconds (with the time it ended), so that
    /// a server's own watcher, which may see the change later, still leaves it out.
    private let outgoingLinks = Lock<[DBusObjectPath: ContinuousClock.Instant?]>([:])
    private static let endedLinkGrace = Duration.seconds(5)

    /// Whether `path` is a link this process opened as a central.
    func isOutgoingLink(_ path: DBusObjectPath) -> Bool {
        outgoingLinks.withLock { links in
            guard let entry = links[path] else { return false }
            guard let ended = entry else { return true }
            return ContinuousClock.now - ended < Self.endedLinkGrace
        }
    }

    /// Forgets a link: it was not this process's to begin with, or connecting failed.
    func forgetOutgoingLink(_ path: DBusObjectPath) {
        outgoingLinks.withLock { _ = $0.removeValue(forKey: path) }
    }

    /// Remembers a link this process opens as a central, until BlueZ reports it down.
    ///
    /// - Returns: Whether it was remembered already.
    func noteOutgoingLink(_ path: DBusObjectPath) -> Bool {
        outgoingLinks.withLock { links in
            let now = ContinuousClock.now
            let known = links[path] != nil && links[path]! == nil
            links = links.filter { $0.value.map { now - $0 < Self.endedLinkGrace } ?? true }
            links[path] = .some(nil)
            return known
        }
    }

    /// Takes links out of ``outgoingLinks`` and tells ``linkLoss`` when BlueZ reports them down,
    /// for as long as the tree lives: one listener for the system, not one per link or request.
    private func watchLinks() {
        let changes = tree.changes()
        let links = outgoingLinks
        let linkLoss = self.linkLoss
        Task {
            for await change in changes {
                switch change {
                case .propertiesChanged(let path, "org.bluez.Device1", let changed, _)
                where (try? changed.decode("Connected", as: Bool.self)) == false:
                    links.withLock { links in if links[path] != nil { links[path] = .some(.now) } }
                    linkLoss.linkWentDown(path)
                case .interfacesRemoved(let path, let interfaces):
                    if interfaces.contains("org.bluez.Device1") {
                        links.withLock { links in if links[path] != nil { links[path] = .some(.now) } }
                    }
                    // Any interface of the device's object going away ends its requests' link.
                    linkLoss.linkWentDown(path)
                case .serviceLeft:
                    linkLoss.linkWentDown(nil)
                default:
                    continue
                }
            }
        }
    }

    static let service = "org.bluez"
    private static let sharedSystem = Lock<BlueZSystem?>(nil)

    private init(connection: DBusConnection, tree: BlueZObjectTree) {
        self.connection = connection
        self.tree = tree
        self.discovery = BlueZDiscoveryCoordinator()
    }

    /// Opens a system on a given connection (tests use a private bus with a fake BlueZ).
    package static func open(on connection: DBusConnection) async throws -> BlueZSystem {
        let system = BlueZSystem(
            connection: connection, tree: try await BlueZObjectTree.start(on: connection, service: service))
        system.watchLinks()
        return system
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
    ///
    /// With `interruption`, the call fails with the error given to it if that comes first.
    func call(
        _ path: DBusObjectPath, _ interface: String, _ method: String, _ arguments: [DBusValue] = [],
        timeout: Duration? = .seconds(25), interruption: DBusCallInterruption? = nil
    ) async throws -> [DBusValue] {
        do {
            return try await connection.call(
                destination: Self.service, path: path, interface: interface, method: method, arguments: arguments,
                timeout: timeout, interruption: interruption)
        } catch {
            throw BluetoothError.translating(error)
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
    /// What dbus-daemon says in the `NoReply` error that answers a call whose recipient left the
    /// bus before it replied.
    static let recipientLeftMessage = "Message recipient disconnected from message bus without replying"

    /// `error` as Able's callers see it: a `DBusError` (BlueZ's or the bus's) mapped through
    /// ``init(dbusError:file:line:)``, anything else as it is. What every call to BlueZ throws.
    static func translating(_ error: any Error) -> any Error {
        (error as? DBusError).map { BluetoothError(dbusError: $0) } ?? error
    }

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
        // The bus answers a call whose recipient left the bus before replying with `NoReply` and
        // this text (dbus-daemon, `bus/connection.c`): bluetoothd exited, or crashed, meanwhile.
        if error.name == .noReply, error.message == Self.recipientLeftMessage {
            self.init(
                .daemonUnavailable, message: "bluetoothd left the bus without answering", cause: error, errorName: nil,
                file: file, line: line)
            return
        }
        // The bus refuses a call or a match rule beyond its limits for this connection (Debian's
        // system bus: 128 calls awaiting replies, 512 match rules) or beyond a peer's queue. Able
        // stays within the first two, so this is another client's doing or a passing flood: it is
        // `notAvailable`, a resource not available right now, which `ReconnectPolicy` retries.
        if error.name == .limitsExceeded {
            self.init(
                .notAvailable, message: "the system bus refused the call for now: \(error.message)", cause: error,
                errorName: error.name.rawValue, file: file, line: line)
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
