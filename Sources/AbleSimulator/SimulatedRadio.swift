import Able
import Synchronization

/// An in-memory Bluetooth radio for tests: simulated adapters and peripherals that find,
/// connect to and talk to each other through the same public API as BlueZ, with no D-Bus,
/// no daemon and no kernel.
///
/// ```swift
/// let radio = SimulatedRadio()
/// let heartRate = radio.addPeripheral(address: "00:00:00:00:00:01", advertisement: Advertisement(
///     localName: "HRM", serviceUUIDs: [.heartRate])) {
///     Service(.heartRate) { Characteristic(.heartRateMeasurement, properties: .notify) }
/// }
/// let adapter = radio.makeAdapter()
/// // … the code under test uses `adapter` exactly as it would use `Adapter.default()` …
/// #expect(radio.openResources.isEmpty)
/// ```
///
/// Everything happens at once: scans report every advertising peripheral as soon as they start,
/// connections and GATT operations complete immediately. A GATT server started on one simulated
/// adapter, and advertised with ``Adapter/startAdvertising(_:)``, is reachable from a central on
/// another.
public final class SimulatedRadio: Sendable {
    let state = Mutex(RadioState())

    public init() {}

    /// A new simulated adapter on this radio, powered on.
    ///
    /// - Parameters:
    ///   - name: Its name, such as `hci0`.
    ///   - address: Its address; by default one derived from the adapter's number on this radio.
    public func makeAdapter(name: String? = nil, address: BluetoothAddress? = nil) -> Adapter {
        let (name, address) = state.withLock { state in
            state.adapterCount += 1
            let number = state.adapterCount
            let resolvedName = name ?? "sim\(number - 1)"
            let resolvedAddress =
                address ?? BluetoothAddress(bytes: [0x5A, 0, 0, 0, UInt8(number >> 8), UInt8(number & 0xFF)])!
            state.adapters[resolvedAddress] = SimulatedAdapterState(name: resolvedName, address: resolvedAddress)
            return (resolvedName, resolvedAddress)
        }
        return Adapter(backend: SimulatedAdapterBackend(radio: self, name: name, address: address))
    }

    /// Adds an advertising peripheral with a GATT server declared like ``GATTServer``'s.
    ///
    /// - Returns: A handle to drive the peripheral from the test: notify, disconnect, inject faults.
    @discardableResult
    public func addPeripheral(
        address: BluetoothAddress, advertisement: Advertisement, rssi: Int = -50, mtu: Int = 23,
        @GATTServerBuilder services: () -> [any GATTServerComponent] = { [] }
    ) -> SimulatedPeripheral {
        let core = GATTServerCore(definition: GATTServerDefinition(services))
        let peripheral = SimulatedPeripheral(radio: self, address: address)
        state.withLock { state in
            state.devices[address] = SimulatedDevice(
                address: address, advertisement: advertisement, rssi: rssi, mtu: mtu, core: core, events: nil)
        }
        announce(address)
        return peripheral
    }

    /// What is still open on the radio: connections, subscriptions, scans, L2CAP listeners and
    /// L2CAP channels. A test that ends with this non-empty leaked something.
    public var openResources: [String] {
        let l2cap = openL2CAPResources()
        return state.withLock { state in
            var open: [String] = []
            for connection in state.connections.sorted(by: { "\($0)" < "\($1)" }) {
                open.append("connection \(connection.central) → \(connection.peripheral)")
            }
            for key in state.subscriptions.keys.sorted(by: { "\($0)" < "\($1)" })
            where !state.subscriptions[key]!.isEmpty {
                open.append("subscription \(key.central) → \(key.peripheral) \(key.attribute)")
            }
            for scan in state.scans.values { open.append("scan on \(scan.adapter)") }
            return open + l2cap
        }
    }

    /// Reports a device to every running scan that wants it.
    func announce(_ address: BluetoothAddress) {
        let deliveries = state.withLock { state -> [(ScanStream.Continuation, Discovery)] in
            guard let device = state.devices[address], let discovery = device.discovery else { return [] }
            return state.scans.values.compactMap { scan in
                guard scan.adapter != address, state.adapters[scan.adapter]?.isPowered == true,
                    scan.filter.matches(discovery)
                else { return nil }
                return (scan.continuation, discovery)
            }
        }
        for (continuation, discovery) in deliveries { continuation.yield(discovery) }
    }
}

/// A simulated peripheral, as the test drives it.
public final class SimulatedPeripheral: Sendable {
    let radio: SimulatedRadio
    /// The peripheral's address.
    public let address: BluetoothAddress

    init(radio: SimulatedRadio, address: BluetoothAddress) {
        self.radio = radio
        self.address = address
    }

    /// Notifies a characteristic's subscribers of a new value, as the peripheral's firmware would.
    public func notify(_ uuid: BluetoothUUID, value: [UInt8]) {
        guard let core = radio.state.withLock({ $0.devices[address]?.core }) else { return }
        for id in core.characteristics(uuid) {
            core.store(value, for: id)
            radio.deliver(value, from: address, attribute: id)
        }
    }

    /// Drops every connection to the peripheral, as when it goes out of range.
    public func disconnectAll(reason: String = "the peripheral went out of range") {
        for central in radio.state.withLock({ $0.connections.filter { $0.peripheral == address }.map(\.central) }) {
            radio.disconnect(central: central, peripheral: address, reason: reason)
        }
    }

    /// Makes the next connection attempt fail with BlueZ's error name and message, for example
    /// `("org.bluez.Error.Failed", "le-connection-abort-by-local")` or `("org.bluez.Error.InProgress", "")`.
    public func failNextConnection(bluezName: String, message: String) {
        radio.state.withLock { $0.devices[address]?.connectFailure = (bluezName, message) }
    }

    /// Stops or restarts advertising.
    public func setAdvertising(_ advertising: Bool) {
        radio.state.withLock { $0.devices[address]?.isAdvertising = advertising }
        if advertising { radio.announce(address) }
    }

    /// Whether a central is connected.
    public var isConnected: Bool {
        radio.state.withLock { state in state.connections.contains { $0.peripheral == address } }
    }
}
