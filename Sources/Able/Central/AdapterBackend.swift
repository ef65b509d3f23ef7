import AbleDBus

/// What a backend (BlueZ, the simulator) provides for an ``Adapter``.
package protocol AdapterBackend: Sendable {
    var name: String { get }
    var currentState: Adapter.State { get }
    func set(_ property: AdapterProperty, _ value: DBusValue) async throws
    func stateChanges() -> AsyncStream<Adapter.State>
}

/// The writable adapter properties, by their BlueZ names.
package enum AdapterProperty: String, Sendable {
    case powered = "Powered"
    case discoverable = "Discoverable"
    case pairable = "Pairable"
    case alias = "Alias"
}
