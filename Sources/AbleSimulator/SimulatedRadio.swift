public import AbleCore
import AbleIO

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
/// Time is simulated: a scan sees a peripheral one advertising interval after it starts (or
/// after the peripheral starts advertising), a connection takes its connection time and its
/// service-resolution time, and every timeout of the radio's adapters runs on ``clock``, which
/// by default jumps ahead as soon as everything is waiting, so nothing sleeps in real time.
/// GATT operations complete without delay, unless a fault such as
/// ``SimulatedPeripheral/answerRequests(after:)`` says otherwise. A GATT server started on one simulated adapter, and
/// advertised with ``/Able/Adapter/startAdvertising(_:)``, is reachable from a central on another.
///
/// The radio records what happens on it, with simulated times, in ``trace``: two runs of the
/// same test give the same trace.
///
/// Faults are injected through the ``SimulatedPeripheral`` that ``addPeripheral(address:addressType:advertisement:rssi:mtu:timing:services:)``
/// returns (or ``peripheral(_:)`` for a simulated adapter's server), and through the adapters'
/// own API (``/Able/Adapter/setPowered(_:)``).
public final class SimulatedRadio: Sendable {
    let state = Lock(RadioState())

    /// The clock every delay and timeout of this radio runs on.
    public let clock: SimulatedClock

    /// The write sockets centrals acquired, one per characteristic of a connection.
    let writeSockets = AcquiredSocketTable<RadioState.SubscriptionKey>()
    /// What the acquired sockets carry and the clock cannot see.
    let socketTraffic = SocketTraffic()

    /// How many events ``trace`` keeps unless told otherwise.
    public static let defaultTraceLimit = 10_000

    /// A radio with no adapters and no peripherals.
    ///
    /// - Parameters:
    ///   - clock: Its clock; by default an automatic one (see ``SimulatedClock``).
    ///   - traceLimit: How many of the latest events ``trace`` keeps, at least 1; by default
    ///     ``defaultTraceLimit``.
    public init(clock: SimulatedClock = SimulatedClock(), traceLimit: Int = SimulatedRadio.defaultTraceLimit) {
        self.clock = clock
        state.withLock { $0.trace = RadioTrace(limit: traceLimit) }
        clock.addHandOffCheck { [weak self] in self?.hasPendingHandOffs ?? false }
        clock.addUnseenWorkCheck { [socketTraffic] in socketTraffic.isBusy }
    }

    /// Whether a scan or notification stream of this radio woke its consumer for a value that the
    /// consumer has not taken yet (or holds one it has not released).
    var hasPendingHandOffs: Bool {
        state.withLock { state in
            state.scans.values.contains { $0.continuation.hasPendingHandOff }
                || state.subscriptions.values.contains { $0.values.contains { $0.hasPendingHandOff } }
        }
    }

    /// Runs `body` on the radio's simulation, where the automatic clock sees all of its work:
    /// ``SimulatedClock/run(isolation:_:)`` of ``clock``.
    ///
    /// ```swift
    /// import AbleSimulator
    /// import Testing
    ///
    /// @Test func findsTheSensor() async throws {
    ///     let radio = SimulatedRadio()
    ///     try await radio.run {
    ///         // … the code under test, on adapters of `radio` …
    ///     }
    /// }
    /// ```
    public func run<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        try await clock.run(body)
    }

    /// A new simulated adapter on this radio, powered on.
    ///
    /// - Parameters:
    ///   - name: Its name, such as `hci0`.
    ///   - address: Its address; by default one derived from the adapter's number on this radio.
    ///   - mtu: The ATT MTU the adapter offers in the MTU exchange of its links, 23 to 517 (BlueZ
    ///     offers 517). A link's MTU is the smaller of its two ends' offers: a central's
    ///     ``/Able/Peripheral/mtu(of:)`` and a GATT server's ``/Able/GATTServer/maximumValueLength(for:)``
    ///     follow from it. By default (`nil`) the adapter takes a peripheral's offer as a central,
    ///     and offers 23 (the ATT minimum) as a GATT server.
    /// - Returns: The adapter.
    public func makeAdapter(name: String? = nil, address: BluetoothAddress? = nil, mtu: Int? = nil) -> Adapter {
        if let mtu { precondition((23...517).contains(mtu), "an ATT MTU of \(mtu) is outside 23–517") }
        let (name, address) = state.withLock { state in
            state.adapterCount += 1
            let number = state.adapterCount
            let resolvedName = name ?? "sim\(number - 1)"
            let resolvedAddress =
                address ?? state.removedAdapters.removeValue(forKey: resolvedName)
                ?? BluetoothAddress(bytes: [0x5A, 0, 0, 0, UInt8(number >> 8), UInt8(number & 0xFF)])!
            state.adapters[resolvedAddress] = SimulatedAdapterState(name: resolvedName, address: resolvedAddress)
            state.adapters[resolvedAddress]?.mtu = mtu
            return (resolvedName, resolvedAddress)
        }
        adapterAdded(address)
        registrationsReturn(to: address)
        return Adapter(backend: SimulatedAdapterBackend(radio: self, name: name, address: address))
    }

    /// Adds an advertising peripheral with a GATT server declared like ``/Able/GATTServer``'s.
    ///
    /// - Parameters:
    ///   - address: Its address.
    ///   - addressType: Whether its address is public or random, as scans report it; a central that
    ///     connects through a ``/Able/Discovery`` finds it only with that type.
    ///   - advertisement: What it advertises.
    ///   - rssi: The signal strength scans report, in dBm.
    ///   - mtu: The ATT MTU of a connection to it.
    ///   - timing: How long its advertising interval, connection and service resolution take.
    ///   - services: Its GATT database and handlers, as in ``/Able/GATTServer/start(on:pacing:_:)``.
    /// - Returns: A handle to drive the peripheral from the test: notify, disconnect, inject faults.
    @discardableResult
    public func addPeripheral(
        address: BluetoothAddress, addressType: BluetoothAddress.AddressType = .public,
        advertisement: Advertisement, rssi: Int = -50, mtu: Int = 23,
        timing: SimulatedPeripheral.Timing = SimulatedPeripheral.Timing(),
        @GATTServerBuilder services: () -> [any GATTServerComponent] = { [] }
    ) -> SimulatedPeripheral {
        let core = GATTServerCore(definition: GATTServerDefinition(services))
        state.withLock { state in
            var device = SimulatedDevice(
                address: address, advertisement: advertisement, rssi: rssi, mtu: mtu, core: core, events: nil)
            device.addressType = addressType
            device.timing = timing
            state.devices[address] = device
        }
        announce(address)
        return SimulatedPeripheral(radio: self, address: address)
    }

    /// The handle of a device on this radio, to inject faults: a peripheral added with
    /// ``addPeripheral(address:addressType:advertisement:rssi:mtu:timing:services:)``, or a simulated adapter
    /// that runs a GATT server or advertises.
    public func peripheral(_ address: BluetoothAddress) -> SimulatedPeripheral {
        SimulatedPeripheral(radio: self, address: address)
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

    /// Reports a device to every running scan that wants it, one advertising interval from now.
    func announce(_ address: BluetoothAddress) {
        let (scans, interval) = state.withLock { state in
            (Array(state.scans.keys), state.devices[address]?.timing.advertisingInterval ?? .zero)
        }
        for scan in scans { scheduleDelivery(of: address, to: scan, after: interval) }
    }

    /// Reports a device to a scan after `delay`, unless the scan ends first.
    func scheduleDelivery(of device: BluetoothAddress, to scanID: UInt64, after delay: Duration) {
        let token = clock.schedule(after: delay) { [self] in deliver(device, to: scanID) }
        state.withLock { state in
            if state.scans[scanID] != nil {
                state.scans[scanID]?.pendingDeliveries.append(token)
            } else {
                clock.cancel(token)
            }
        }
    }
}
