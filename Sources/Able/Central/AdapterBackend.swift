import AbleDBus

/// What a backend (BlueZ, the simulator) provides for an ``Adapter``.
package protocol AdapterBackend: Sendable {
    var name: String { get }
    var currentState: Adapter.State { get }
    func set(_ property: AdapterProperty, _ value: DBusValue) async throws
    func stateChanges() -> AsyncStream<Adapter.State>
    /// Starts a scan; discoveries go to `continuation` until it terminates.
    func scan(_ filter: ScanFilter, into continuation: ScanStream.Continuation) async throws
    func peripheral(address: BluetoothAddress) -> any PeripheralBackend
    func gattServerBackend() async throws -> any GATTServerBackend
    func startAdvertising(_ advertisement: Advertisement) async throws -> AdvertisingSet
}

/// The writable adapter properties, by their BlueZ names.
package enum AdapterProperty: String, Sendable {
    case powered = "Powered"
    case discoverable = "Discoverable"
    case pairable = "Pairable"
    case alias = "Alias"
}
