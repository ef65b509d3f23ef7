import AbleDBus

/// A copy of `bluetoothd`'s objects: a `GetManagedObjects` answer kept current by applying the
/// `InterfacesAdded`, `InterfacesRemoved` and `PropertiesChanged` signals that follow it.
///
/// Subscribe first, then load the tree, then apply every signal received since subscribing, in
/// order: signals older than the answer then replay changes it already holds, and the copy
/// converges on BlueZ's tree.
struct ObjectTree: Sendable {
    typealias Properties = [String: DBusVariant]
    typealias Objects = [DBusObjectPath: [String: Properties]]

    private(set) var objects: Objects

    init(_ objects: Objects) {
        self.objects = objects
    }

    /// The properties of `interface` at `path`, or `nil` when the object lacks it.
    subscript(path: DBusObjectPath, interface: String) -> Properties? {
        objects[path]?[interface]
    }

    /// The objects that have `interface`, with that interface's properties.
    func objects(with interface: String) -> [DBusObjectPath: Properties] {
        objects.compactMapValues { $0[interface] }
    }

    /// Applies one signal of `bluetoothd`; other signals change nothing.
    mutating func apply(_ signal: DBusSignal) throws {
        switch (signal.interface, signal.member) {
        case (BlueZ.objectManager, "InterfacesAdded"):
            let path = try signal.arguments[0].decode(DBusObjectPath.self)
            let added = try signal.arguments[1].decode([String: Properties].self)
            objects[path, default: [:]].merge(added) { _, new in new }
        case (BlueZ.objectManager, "InterfacesRemoved"):
            let path = try signal.arguments[0].decode(DBusObjectPath.self)
            for interface in try signal.arguments[1].decode([String].self) {
                objects[path]?[interface] = nil
            }
            if objects[path]?.isEmpty == true { objects[path] = nil }
        case (BlueZ.properties, "PropertiesChanged"):
            let interface = try signal.arguments[0].decode(String.self)
            guard objects[signal.path]?[interface] != nil else { return }
            let changed = try signal.arguments[1].decode(Properties.self)
            objects[signal.path]?[interface]?.merge(changed) { _, new in new }
            for name in try signal.arguments[2].decode([String].self) {
                objects[signal.path]?[interface]?[name] = nil
            }
        default:
            return
        }
    }

    /// Applies `signals` until `condition` holds for the tree, for at most `timeout`.
    ///
    /// - Returns: The tree as it was when `condition` first held (it is checked before any signal too).
    /// - Throws: ``TimedOut`` naming `what` when the time runs out; what the stream throws.
    func waiting(
        for what: String, timeout: Duration, signals: DBusSignalStream,
        until condition: @escaping @Sendable (ObjectTree) -> Bool
    ) async throws -> ObjectTree {
        let start = self
        return try await withDeadline(timeout, waitingFor: what) {
            var tree = start
            if condition(tree) { return tree }
            for try await signal in signals {
                try tree.apply(signal)
                if condition(tree) { return tree }
            }
            throw StreamEnded(waitingFor: what)
        }
    }
}

extension ObjectTree {
    /// The `Device1` objects of `adapter` whose `Address` is `address`.
    func devices(of adapter: DBusObjectPath, address: String) -> [DBusObjectPath: Properties] {
        objects(with: BlueZ.device1).filter { path, properties in
            path.parent == adapter && (try? properties.decode("Address", as: String.self)) == address
        }
    }

    /// The `Address` of each of `adapters` that has one.
    func addresses(of adapters: [DBusObjectPath]) -> [DBusObjectPath: String] {
        adapters.reduce(into: [:]) { addresses, adapter in
            addresses[adapter] = try? self[adapter, BlueZ.adapter1]?.decode("Address", as: String.self)
        }
    }
}
