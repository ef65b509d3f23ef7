/// What a backend (BlueZ, the simulator) provides for an ``Adapter``.
package protocol AdapterBackend: Sendable {
    var name: String { get }
    var currentState: Adapter.State { get }
    func set(_ change: AdapterChange) async throws
    func stateChanges() -> AsyncStream<Adapter.State>
    /// Starts a scan; discoveries go to `continuation` until it terminates.
    func scan(_ filter: ScanFilter, into continuation: ScanStream.Continuation) async throws
    /// Starts a passive scan through an advertisement monitor; discoveries go to `continuation`.
    func passiveScan(_ filter: PassiveScanFilter, into continuation: ScanStream.Continuation) async throws
    /// The peripheral at `address`; `addressType`, when known (from a scan), is the one it must
    /// have: a device found with another type is not it.
    func peripheral(address: BluetoothAddress, addressType: BluetoothAddress.AddressType?) -> any PeripheralBackend
    func gattServerBackend() async throws -> any GATTServerBackend
    func startAdvertising(_ advertisement: Advertisement) async throws -> AdvertisingSet
    /// What the adapter can advertise now.
    func advertisingCapabilities() async throws -> AdvertisingCapabilities
    /// Listens for L2CAP LE credit-based channels on this adapter.
    func listenL2CAP(psm: PSM, _ options: L2CAPOptions) async throws -> L2CAPListener
    /// Waits `duration` on the backend's clock: the wall clock on BlueZ, simulated time on the
    /// simulator. Timeouts of the public API (such as ``ScanStream/first(timeout:)``) use it.
    func sleep(for duration: Duration) async throws
}

extension AdapterBackend {
    package func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}

/// A change of one writable adapter property.
package enum AdapterChange: Sendable {
    case powered(Bool)
    case discoverable(Bool)
    case pairable(Bool)
    case alias(String)
}
