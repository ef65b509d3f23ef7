import AbleDBus

/// An adapter as BlueZ exports it: an `org.bluez.Adapter1` object such as `/org/bluez/hci0`.
struct BlueZAdapterBackend: AdapterBackend {
    static let interface = "org.bluez.Adapter1"

    let system: BlueZSystem
    let name: String
    let path: DBusObjectPath

    /// Finds the adapter named `name`, or the first adapter when `name` is `nil`.
    static func open(name: String?, system: BlueZSystem) async throws -> BlueZAdapterBackend {
        let adapters = system.tree.objects.filter { $0.value[interface] != nil }.keys.sorted()
        let path: DBusObjectPath
        if let name {
            guard let found = adapters.first(where: { $0.lastElement == name }) else {
                throw BluetoothError(
                    .doesNotExist,
                    message:
                        "no adapter named \(name) (BlueZ has \(adapters.map(\.lastElement).joined(separator: ", ")))")
            }
            path = found
        } else {
            guard let first = adapters.first else {
                throw BluetoothError(.notAvailable, message: "BlueZ has no Bluetooth adapter")
            }
            path = first
        }
        return BlueZAdapterBackend(system: system, name: path.lastElement, path: path)
    }

    var currentState: Adapter.State {
        Self.state(name: name, from: system.tree.properties(of: Self.interface, at: path))
    }

    static func state(name: String, from properties: [String: DBusVariant]?) -> Adapter.State {
        guard let properties else { return .absent(name) }
        func value<T: DBusRepresentable>(_ key: String, _ fallback: T) -> T {
            (try? properties.decode(key, as: T.self)) ?? fallback
        }
        return Adapter.State(
            name: name, address: BluetoothAddress(value("Address", "")), systemName: value("Name", ""),
            alias: value("Alias", ""), isPowered: value("Powered", false), isDiscoverable: value("Discoverable", false),
            isPairable: value("Pairable", false), isDiscovering: value("Discovering", false), isPresent: true)
    }

    func set(_ property: AdapterProperty, _ value: DBusValue) async throws {
        guard system.tree.interfaces(at: path) != nil else {
            throw BluetoothError(
                system.tree.owner == nil ? .daemonUnavailable : .notAvailable, message: "adapter \(name) is not present"
            )
        }
        try await system.setProperty(path, Self.interface, property.rawValue, value)
    }

    func stateChanges() -> AsyncStream<Adapter.State> {
        let (stream, continuation) = AsyncStream<Adapter.State>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let changes = system.tree.changes()
        var last = currentState
        continuation.yield(last)
        let task = Task { [system, name, path] in
            for await change in changes {
                switch change {
                case .interfacesAdded(let changed, _), .interfacesRemoved(let changed, _),
                    .propertiesChanged(let changed, _, _, _):
                    guard changed == path else { continue }
                }
                let state = Self.state(name: name, from: system.tree.properties(of: Self.interface, at: path))
                if state != last {
                    last = state
                    continuation.yield(state)
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
