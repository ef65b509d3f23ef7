import AbleCore
import AbleDBus
import AbleIO
import Synchronization

/// One change of BlueZ's object tree, in the order BlueZ announced it.
enum ObjectTreeChange: Sendable {
    case interfacesAdded(DBusObjectPath, [String: [String: DBusVariant]])
    case interfacesRemoved(DBusObjectPath, [String])
    case propertiesChanged(DBusObjectPath, interface: String, changed: [String: DBusVariant], invalidated: [String])
    /// A device's link ended, and why (`Device1.Disconnected`, BlueZ 5.83 and later): BlueZ's
    /// reason name (`org.bluez.Reason.Remote`, …) and its message. It comes before the
    /// `Connected = false` it explains; it changes no object.
    case deviceDisconnected(DBusObjectPath, reason: String, message: String)
    /// The service left the bus (bluetoothd stopped or the connection was lost); the removal of
    /// every object follows.
    case serviceLeft

    /// The object the change is about; `nil` for the service leaving.
    var path: DBusObjectPath? {
        switch self {
        case .interfacesAdded(let path, _), .interfacesRemoved(let path, _), .propertiesChanged(let path, _, _, _),
            .deviceDisconnected(let path, _, _):
            path
        case .serviceLeft: nil
        }
    }
}

/// The objects of one D-Bus service with an `ObjectManager` at `/` (BlueZ), tracked once per
/// connection: one `GetManagedObjects`, then `InterfacesAdded`, `InterfacesRemoved` and
/// `PropertiesChanged`. When the service leaves the bus (bluetoothd stops) every object is
/// removed; when it comes back the tree is loaded again and its objects are added.
///
/// Readers take synchronous snapshots; listeners get every change through ``changes()``.
final class BlueZObjectTree: Sendable {
    typealias Interfaces = [String: [String: DBusVariant]]

    struct State {
        var objects: [DBusObjectPath: Interfaces] = [:]
        var owner: String?
        var listeners: [UInt64: AsyncStream<ObjectTreeChange>.Continuation] = [:]
        var nextListener: UInt64 = 0
        /// Counts the changes applied. With ``lastSet`` it keeps a ``BlueZObjectTree/refresh(_:at:)``
        /// reply, which the caller's task applies after the event loop may have applied later
        /// signals, from overwriting what those signals set.
        var sequence: UInt64 = 0
        /// For each object, the ``sequence`` of the change that last set each of its properties
        /// (keyed `interface.name`).
        var lastSet: [DBusObjectPath: [String: UInt64]] = [:]
        /// The reads (`GetManagedObjects`, `GetAll`) whose replies are not applied yet.
        var readsInFlight = 0
        /// While reads are in flight, the ``sequence`` of the change that removed each interface
        /// (by object, then interface), so that a snapshot taken before cannot bring it back.
        /// Emptied when no read is in flight: it never grows with the devices a scan comes across.
        var removedDuringReads: [DBusObjectPath: [String: UInt64]] = [:]
        /// Why each device's last link ended, as BlueZ 5.83 and later announce it (reason name and
        /// message), until the device connects again or goes away.
        var disconnections: [DBusObjectPath: (reason: String, message: String)] = [:]
        /// Counts the changes that can change a device's GATT database: a GATT attribute's
        /// interface added or removed, or one of its properties other than the volatile ones
        /// (``volatileGATTProperties``) changed.
        var gattVersion: UInt64 = 0
        /// The GATT database of each device that was looked up since the last such change.
        var gattDatabases: [DBusObjectPath: [RemoteService]] = [:]

        /// The properties of GATT attributes that change while the database stays the same.
        static let volatileGATTProperties: Set<String> = [
            "Value", "Notifying", "NotifyAcquired", "WriteAcquired", "MTU",
        ]

        /// Notes a read about to be sent; returns the ``sequence`` its reply is to be applied after.
        mutating func beginRead() -> UInt64 {
            readsInFlight += 1
            return sequence
        }

        /// Notes a read whose reply was applied, or failed.
        mutating func endRead() {
            readsInFlight -= 1
            if readsInFlight == 0 { removedDuringReads = [:] }
        }

        /// Applies a change; returns whether it changed anything.
        mutating func apply(_ change: ObjectTreeChange) -> Bool {
            sequence &+= 1
            switch change {
            case .interfacesAdded(let path, let interfaces):
                objects[path, default: [:]].merge(interfaces) { $1 }
                for (interface, properties) in interfaces { noteSet(properties.keys, of: interface, at: path) }
                if interfaces.keys.contains(where: Self.isGATT) { gattChanged() }
            case .interfacesRemoved(let path, let names):
                if readsInFlight > 0 {
                    for name in names { removedDuringReads[path, default: [:]][name] = sequence }
                }
                if names.contains("org.bluez.Device1") { disconnections[path] = nil }
                guard var object = objects[path] else { return false }
                for name in names { object[name] = nil }
                objects[path] = object.isEmpty ? nil : object
                if object.isEmpty { lastSet[path] = nil }
                if names.contains(where: Self.isGATT) { gattChanged() }
            case .propertiesChanged(let path, let interface, let changed, let invalidated):
                guard objects[path]?[interface] != nil else { return false }
                if interface == "org.bluez.Device1", (try? changed.decode("Connected", as: Bool.self)) == true {
                    disconnections[path] = nil
                }
                objects[path]![interface]!.merge(changed) { $1 }
                for name in invalidated { objects[path]![interface]![name] = nil }
                noteSet(changed.keys, of: interface, at: path)
                noteSet(invalidated, of: interface, at: path)
                if Self.isGATT(interface),
                    !changed.keys.allSatisfy(Self.volatileGATTProperties.contains)
                        || !invalidated.allSatisfy(Self.volatileGATTProperties.contains)
                {
                    gattChanged()
                }
            case .deviceDisconnected(let path, let reason, let message):
                guard objects[path]?["org.bluez.Device1"] != nil else { return false }
                disconnections[path] = (reason, message)
            case .serviceLeft:
                guard owner != nil else { return false }
                owner = nil
            }
            return true
        }

        /// Applies the properties a `GetAll` read after change number `since` returned, except
        /// those a later change set; returns the change as applied, if it changed anything.
        mutating func applyRead(
            _ properties: [String: DBusVariant], of interface: String, at path: DBusObjectPath, after since: UInt64
        ) -> ObjectTreeChange? {
            let setLater = lastSet[path] ?? [:]
            let current = properties.filter { (setLater["\(interface).\($0.key)"] ?? 0) <= since }
            let change = ObjectTreeChange.propertiesChanged(
                path, interface: interface, changed: current, invalidated: [])
            return apply(change) ? change : nil
        }

        /// Applies the objects a `GetManagedObjects` read after change number `since` returned,
        /// except the interfaces a later change removed and the properties a later change set;
        /// returns the changes as applied.
        mutating func applyLoad(_ snapshot: [DBusObjectPath: Interfaces], after since: UInt64) -> [ObjectTreeChange] {
            var applied: [ObjectTreeChange] = []
            for (path, interfaces) in snapshot.sorted(by: { $0.key < $1.key }) {
                let removedLater = removedDuringReads[path] ?? [:]
                let setLater = lastSet[path] ?? [:]
                var kept: Interfaces = [:]
                for (interface, properties) in interfaces where (removedLater[interface] ?? 0) <= since {
                    // Merged into what the interface has: adding an interface replaces it whole.
                    let current = properties.filter { (setLater["\(interface).\($0.key)"] ?? 0) <= since }
                    kept[interface] = (objects[path]?[interface] ?? [:]).merging(current) { $1 }
                }
                guard !kept.isEmpty else { continue }
                let change = ObjectTreeChange.interfacesAdded(path, kept)
                if apply(change) { applied.append(change) }
            }
            return applied
        }

        private static func isGATT(_ interface: String) -> Bool { interface.hasPrefix("org.bluez.Gatt") }

        /// Forgets the GATT databases built before a change that may have changed them.
        private mutating func gattChanged() {
            gattVersion &+= 1
            gattDatabases.removeAll()
        }

        private mutating func noteSet(_ names: some Sequence<String>, of interface: String, at path: DBusObjectPath) {
            for name in names { lastSet[path, default: [:]]["\(interface).\(name)"] = sequence }
        }
    }

    /// Takes the `PropertiesChanged` signals of one characteristic before the tree does: see
    /// ``receiveValues(of:deliver:onConnectionLost:)``.
    struct ValueReceiver: Sendable {
        let id: UInt64
        /// Reads a signal in place; returns whether it changed nothing but the value.
        let deliver: @Sendable (DBusSignalView) -> Bool
        let connectionLost: @Sendable (any Error) -> Void
    }

    /// The value receivers by characteristic path, and the last path looked up with what it found.
    /// A peripheral's notifications mostly come from one characteristic after another of the same,
    /// and AbleDBus hands out a recent path as the same string each time, so most lookups compare
    /// one string (by identity first) instead of hashing a path.
    struct ValueReceivers {
        private(set) var byPath: [String: ValueReceiver] = [:]
        private var last: (path: String, receiver: ValueReceiver?)?

        /// The receiver of `path`'s signals, if any, remembered for the next lookup.
        mutating func receiver(for path: String) -> ValueReceiver? {
            if let last, last.path == path { return last.receiver }
            let receiver = byPath[path]
            last = (path, receiver)
            return receiver
        }

        subscript(path: String) -> ValueReceiver? {
            get { byPath[path] }
            set {
                byPath[path] = newValue
                last = nil
            }
        }
    }

    let connection: DBusConnection
    let service: String
    private let state = Lock(State())
    /// Looked up for every signal of the service, so a lock and no actor.
    private let valueReceivers = Lock(ValueReceivers())
    private let nextValueReceiver = Atomic<UInt64>(0)
    private let tasks = Lock<[Task<Void, Never>]>([])
    private let subscription = Lock<DBusSignalSubscription?>(nil)

    private init(connection: DBusConnection, service: String) {
        self.connection = connection
        self.service = service
    }

    /// Starts tracking `service` on `connection`.
    ///
    /// - Throws: ``BluetoothError`` (``BluetoothError/Code/daemonUnavailable``) when the service is
    ///   not on the bus, or the D-Bus error of the first `GetManagedObjects`.
    static func start(on connection: DBusConnection, service: String = "org.bluez") async throws -> BlueZObjectTree {
        let tree = BlueZObjectTree(connection: connection, service: service)
        // Subscribe before loading, so no change between the two is missed. Changes are applied
        // on the connection's event loop as they are dispatched: no task, no hop.
        let subscription = try await connection.subscribe(
            matching: DBusMatchRule(sender: service),
            readingInPlace: { [weak tree] view in
                // The rule's sender is the service's name: AbleDBus delivers only what its current
                // owner sends, in bus order. Notified values are the notification streams'
                // business, and by far the most frequent signal: a characteristic's receiver reads
                // them in place, and the tree, which keeps no values, skips a change of nothing
                // but the value before decoding anything.
                guard let tree else { return }
                if let receiver = tree.valueReceivers.withLock({ $0.receiver(for: view.path) }), receiver.deliver(view)
                {
                    return
                }
                guard !view.changesOnly(property: "Value", of: "org.bluez.GattCharacteristic1"),
                    let signal = try? view.decoded(), let change = Self.change(from: signal)
                else { return }
                tree.publish([change])
            },
            onEnd: { [weak tree] error in
                // The connection is gone: the tree can no longer be trusted.
                guard let error, let tree else { return }
                for receiver in tree.valueReceivers.withLock({ Array($0.byPath.values) }) {
                    receiver.connectionLost(error)
                }
                tree.vanish()
            })
        let owners = try await connection.nameOwnerChanges(of: service)
        guard let owner = try await connection.nameOwner(of: service) else {
            subscription.cancel()
            throw BluetoothError(.daemonUnavailable, message: "\(service) is not on the bus: is bluetoothd running?")
        }
        try await tree.load(owner: owner)
        tree.subscription.withLock { $0 = subscription }
        tree.tasks.withLock { tasks in
            tasks.append(Task { [weak tree] in await tree?.follow(owners) })
        }
        return tree
    }

    deinit {
        subscription.withLock { $0?.cancel() }
        for task in tasks.withLock({ $0 }) { task.cancel() }
        for listener in state.withLock({ $0.listeners.values }) { listener.finish() }
    }

    /// Hands the `PropertiesChanged` signals of `characteristic` to `deliver`, read in place on
    /// the connection's event loop, before the tree looks at them; `onConnectionLost` runs if the bus
    /// connection is lost. The service's own subscription carries them: no match rule of its
    /// own. Returns the function that ends it.
    func receiveValues(
        of characteristic: DBusObjectPath, deliver: @escaping @Sendable (DBusSignalView) -> Bool,
        onConnectionLost: @escaping @Sendable (any Error) -> Void
    ) -> @Sendable () -> Void {
        let id = nextValueReceiver.add(1, ordering: .relaxed).newValue
        let path = characteristic.rawValue
        valueReceivers.withLock {
            $0[path] = ValueReceiver(id: id, deliver: deliver, connectionLost: onConnectionLost)
        }
        return { [weak self] in
            self?.valueReceivers.withLock { if $0[path]?.id == id { $0[path] = nil } }
        }
    }

    /// How many listeners follow the tree's changes (each is a task of Able's) and how many
    /// characteristics have a value receiver: for tests that check that nothing leaks.
    var resourceCounts: (listeners: Int, valueReceivers: Int) {
        (state.withLock { $0.listeners.count }, valueReceivers.withLock { $0.byPath.count })
    }

    /// Every object now.
    var objects: [DBusObjectPath: Interfaces] { state.withLock { $0.objects } }

    /// The GATT database of the device at `device`, as `build` makes it from the objects: built
    /// once after each change of the tree's GATT attributes, and kept until the next, so that
    /// looking an attribute up does not walk every object BlueZ exports (a scan's devices
    /// among them) each time.
    func gattDatabase(
        of device: DBusObjectPath, build: ([DBusObjectPath: Interfaces]) -> [RemoteService]
    ) -> [RemoteService] {
        let (version, built, objects) = state.withLock { state in
            (state.gattVersion, state.gattDatabases[device], state.objects)
        }
        if let built { return built }
        let database = build(objects)
        // Kept only if no change came meanwhile: a database built from older objects would stay.
        state.withLock { if $0.gattVersion == version { $0.gattDatabases[device] = database } }
        return database
    }

    /// The interfaces of one object now, or `nil` when it does not exist.
    func interfaces(at path: DBusObjectPath) -> Interfaces? { state.withLock { $0.objects[path] } }

    /// The properties of one interface of one object now.
    func properties(of interface: String, at path: DBusObjectPath) -> [String: DBusVariant]? {
        state.withLock { $0.objects[path]?[interface] }
    }

    /// Why the last link of the device at `path` ended, as BlueZ 5.83 and later announce it
    /// (reason name and message); `nil` while it is connected, or when BlueZ did not say.
    func disconnection(of path: DBusObjectPath) -> (reason: String, message: String)? {
        state.withLock { $0.disconnections[path] }
    }

    /// The unique bus name of the service now, or `nil` while it is away.
    var owner: String? { state.withLock { $0.owner } }

    /// The changes from now on.
    ///
    /// Buffering: unbounded, since a listener that fell behind and lost a change would hold a
    /// wrong picture of the tree; listeners are Able's own, and keep up.
    func changes() -> AsyncStream<ObjectTreeChange> {
        let (stream, continuation) = AsyncStream<ObjectTreeChange>.makeStream()
        let id = state.withLock { state in
            state.nextListener += 1
            state.listeners[state.nextListener] = continuation
            return state.nextListener
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.listeners.removeValue(forKey: id) }
        }
        return stream
    }

    fileprivate func publish(_ changes: [ObjectTreeChange]) {
        publish { state in changes.filter { state.apply($0) } }
    }

    /// Applies what `apply` returns as applied, and tells the listeners.
    private func publish(_ apply: (inout State) -> [ObjectTreeChange]) {
        let (applied, listeners) = state.withLock { state in
            let applied = apply(&state)
            return (applied, applied.isEmpty ? [] : Array(state.listeners.values))
        }
        for listener in listeners {
            for change in applied { listener.yield(change) }
        }
    }

    /// Reads one interface's properties again and applies them as a change.
    ///
    /// BlueZ does not announce every change (5.66 often omits `Connected = true` after
    /// `Device1.Connect`), so a caller that must know calls this after the operation.
    func refresh(_ interface: String, at path: DBusObjectPath) async throws {
        let since = state.withLock { $0.beginRead() }
        var properties: [String: DBusVariant]
        do {
            let reply = try await connection.call(
                destination: service, path: path, interface: "org.freedesktop.DBus.Properties", method: "GetAll",
                arguments: [.string(interface)])
            properties = try reply.first.unwrapped("GetAll").decode([String: DBusVariant].self)
        } catch {
            state.withLock { $0.endRead() }
            throw BluetoothError.translating(error)
        }
        // The reply resumes this task after the loop may have applied later signals: keep theirs.
        publish { state in
            defer { state.endRead() }
            return state.applyRead(properties, of: interface, at: path, after: since).map { [$0] } ?? []
        }
    }

    private func load(owner: String) async throws {
        let since = state.withLock { $0.beginRead() }
        let objects: [DBusObjectPath: Interfaces]
        do {
            let reply = try await connection.call(
                destination: service, path: .root, interface: "org.freedesktop.DBus.ObjectManager",
                method: "GetManagedObjects")
            objects = try reply.first.unwrapped("GetManagedObjects").decode([DBusObjectPath: Interfaces].self)
        } catch {
            state.withLock { $0.endRead() }
            throw BluetoothError.translating(error)
        }
        // As for a refresh: signals applied since the call was sent are newer than the snapshot (a
        // device removed, a property changed), so the snapshot does not bring back or overwrite them.
        publish { state in
            defer { state.endRead() }
            state.owner = owner
            return state.applyLoad(objects, after: since)
        }
    }

    private func follow(_ owners: NameOwnerChangeStream) async {
        do {
            for try await change in owners {
                vanish()
                if let newOwner = change.newOwner {
                    state.withLock { $0.owner = newOwner }
                    // bluetoothd needs a moment to export its tree after taking the name.
                    try? await load(owner: newOwner)
                }
            }
        } catch {
            vanish()
        }
    }

    /// Removes every object, as happens when the service leaves the bus.
    fileprivate func vanish() {
        let removals = state.withLock { state in
            state.objects.sorted { $0.key < $1.key }.map {
                ObjectTreeChange.interfacesRemoved($0.key, Array($0.value.keys))
            }
        }
        // Announced first, so that listeners can tell the objects' removal from BlueZ's own.
        publish([.serviceLeft] + removals)
    }

    static func change(from signal: DBusSignal) -> ObjectTreeChange? {
        do {
            switch (signal.interface, signal.member) {
            case ("org.freedesktop.DBus.ObjectManager", "InterfacesAdded"):
                guard signal.arguments.count == 2 else { return nil }
                return .interfacesAdded(try signal.arguments[0].decode(), try signal.arguments[1].decode())
            case ("org.freedesktop.DBus.ObjectManager", "InterfacesRemoved"):
                guard signal.arguments.count == 2 else { return nil }
                return .interfacesRemoved(try signal.arguments[0].decode(), try signal.arguments[1].decode())
            case ("org.freedesktop.DBus.Properties", "PropertiesChanged"):
                // (A change of nothing but a characteristic's value never gets here: the
                // subscription skips it before decoding.)
                guard signal.arguments.count == 3 else { return nil }
                return .propertiesChanged(
                    signal.path, interface: try signal.arguments[0].decode(), changed: try signal.arguments[1].decode(),
                    invalidated: try signal.arguments[2].decode())
            case ("org.bluez.Device1", "Disconnected"):
                guard signal.arguments.count == 2 else { return nil }
                return .deviceDisconnected(
                    signal.path, reason: try signal.arguments[0].decode(), message: try signal.arguments[1].decode())
            default:
                return nil
            }
        } catch {
            // A malformed announcement is ignored rather than corrupting the tree.
            return nil
        }
    }
}

extension Optional where Wrapped == DBusValue {
    func unwrapped(_ what: String) throws -> DBusValue {
        guard let self else { throw BluetoothError(.protocolError, message: "\(what) returned no value") }
        return self
    }
}

extension BlueZObjectTree {
    /// Why the adapter at `path` cannot be used, `nil` while it is on the bus:
    /// ``BluetoothError/Code/daemonUnavailable`` when `bluetoothd` has left the bus, else
    /// ``BluetoothError/Code/adapterRemoved``.
    func adapterAbsence(_ path: DBusObjectPath, _ message: @autoclosure () -> String) -> BluetoothError? {
        guard interfaces(at: path) == nil else { return nil }
        return BluetoothError(owner == nil ? .daemonUnavailable : .adapterRemoved, message: message())
    }

    /// `state()` now and then each time it differs after a change of the object at `path`; the
    /// stream ends when the tree stops following BlueZ, and stops the following when it is dropped.
    func states<State: Equatable & Sendable>(
        of path: DBusObjectPath, bufferingPolicy: AsyncStream<State>.Continuation.BufferingPolicy,
        _ state: @escaping @Sendable () -> State
    ) -> AsyncStream<State> {
        let (stream, continuation) = AsyncStream<State>.makeStream(bufferingPolicy: bufferingPolicy)
        let changes = changes()
        var last = state()
        continuation.yield(last)
        let task = Task {
            for await change in changes where change.path == path {
                let current = state()
                if current != last {
                    last = current
                    continuation.yield(current)
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
