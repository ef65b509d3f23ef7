/// A local Bluetooth adapter: its state, its power, and the stream of its changes.
///
/// Obtain the system's default adapter with `Adapter.default()` or one by name with
/// `Adapter.named(_:)`, from the `Able` module; the same type serves every backend: BlueZ on a
/// real system, the simulator in tests.
///
/// ```swift
/// let adapter = try await Adapter.default()
/// if await !adapter.state.isPowered { try await adapter.setPowered(true) }
/// for await state in await adapter.stateChanges() { print(state) }
/// ```
///
/// The adapter keeps no mutable state of its own (its backend follows BlueZ's object, or the
/// simulated radio): it is an actor so that it is shared between tasks as safely as the other
/// public types and its members are awaited like theirs, which they can stay if it gains state.
public actor Adapter {
    /// What an adapter looks like at one moment.
    public struct State: Sendable, Equatable, CustomStringConvertible {
        /// The adapter's name, such as `hci0`.
        public var name: String
        /// Its public address.
        public var address: BluetoothAddress?
        /// Its system name (BlueZ's `Name`).
        public var systemName: String
        /// The name it shows to others (BlueZ's `Alias`).
        public var alias: String
        /// Whether the radio is on.
        public var isPowered: Bool
        /// Whether other devices can discover it.
        public var isDiscoverable: Bool
        /// Whether other devices can pair with it.
        public var isPairable: Bool
        /// Whether it is scanning.
        public var isDiscovering: Bool
        /// Whether the adapter exists now: `false` while `bluetoothd` restarts or after it is unplugged.
        public var isPresent: Bool

        package init(
            name: String, address: BluetoothAddress?, systemName: String, alias: String, isPowered: Bool,
            isDiscoverable: Bool, isPairable: Bool, isDiscovering: Bool, isPresent: Bool
        ) {
            self.name = name
            self.address = address
            self.systemName = systemName
            self.alias = alias
            self.isPowered = isPowered
            self.isDiscoverable = isDiscoverable
            self.isPairable = isPairable
            self.isDiscovering = isDiscovering
            self.isPresent = isPresent
        }

        public var description: String {
            guard isPresent else { return "\(name): absent" }
            return "\(name) \(address.map(String.init(describing:)) ?? "?") \(isPowered ? "powered" : "off")"
                + (isDiscovering ? ", discovering" : "") + (isDiscoverable ? ", discoverable" : "")
        }

        package static func absent(_ name: String) -> State {
            State(
                name: name, address: nil, systemName: "", alias: "", isPowered: false, isDiscoverable: false,
                isPairable: false, isDiscovering: false, isPresent: false)
        }
    }

    package let backend: any AdapterBackend

    /// The adapter's name, such as `hci0`.
    public nonisolated let name: String

    package init(backend: any AdapterBackend) {
        self.backend = backend
        self.name = backend.name
    }

    /// Waits `duration` on the adapter's clock: the wall clock on BlueZ, simulated time on a
    /// simulated radio.
    package nonisolated func sleep(for duration: Duration) async throws {
        try await backend.sleep(for: duration)
    }

    /// The adapter's state now.
    public var state: State { backend.currentState }

    /// Turns the radio on or off.
    ///
    /// The corresponding BlueZ property is `org.bluez.Adapter1.Powered`.
    /// - Throws: ``BluetoothError`` when BlueZ refuses (for example ``BluetoothError/Code/notReady``
    ///   or a blocked radio) or the adapter is gone.
    public func setPowered(_ powered: Bool) async throws {
        try await backend.set(.powered(powered))
    }

    /// Makes the adapter discoverable by others, or not.
    ///
    /// The corresponding BlueZ property is `org.bluez.Adapter1.Discoverable`.
    public func setDiscoverable(_ discoverable: Bool) async throws {
        try await backend.set(.discoverable(discoverable))
    }

    /// Allows pairing with the adapter, or not.
    ///
    /// The corresponding BlueZ property is `org.bluez.Adapter1.Pairable`.
    public func setPairable(_ pairable: Bool) async throws {
        try await backend.set(.pairable(pairable))
    }

    /// Sets the name the adapter shows to others; the empty string restores the system name.
    ///
    /// The corresponding BlueZ property is `org.bluez.Adapter1.Alias`.
    /// - Throws: ``BluetoothError/Code/valueTooLong`` for a name over the 248 bytes of UTF-8 a
    ///   controller holds (checked before asking BlueZ), or what BlueZ answered.
    public func setAlias(_ alias: String) async throws {
        try InputChecks.alias(alias)
        try await backend.set(.alias(alias))
    }

    /// The adapter's states from now on, starting with the current one.
    ///
    /// A state is delivered each time one of its values changes, including the adapter
    /// disappearing (``State/isPresent`` false, when `bluetoothd` stops) and coming back.
    ///
    /// Buffering: the newest state only; a consumer that falls behind skips intermediate states
    /// (the count of skipped states is not kept: only the latest state matters).
    ///
    /// Cancelling the task that iterates ends the stream: `next()` returns `nil` once the
    /// values already buffered are taken, and the work behind the stream stops. Here the
    /// work is watching the adapter.
    public func stateChanges() -> AsyncStream<State> {
        backend.stateChanges()
    }

    /// The peripheral a scan discovered, with the address type the scan reported
    /// (``Peripheral/addressType``): connecting finds that device only.
    public nonisolated func peripheral(for discovery: Discovery) -> Peripheral {
        Peripheral(
            backend: backend.peripheral(address: discovery.address, addressType: discovery.addressType),
            addressType: discovery.addressType)
    }

    /// The peripheral with the given address, of whatever address type. Connecting needs no scan
    /// when the adapter knows the device (see ``knownPeripherals()``); otherwise it is looked for
    /// within the connect timeout.
    public nonisolated func peripheral(address: BluetoothAddress) -> Peripheral {
        Peripheral(backend: backend.peripheral(address: address, addressType: nil))
    }

    /// Connects to a peripheral, runs `body`, and disconnects, whatever `body` does.
    ///
    /// `body` runs where the caller is (on the main actor when called from there, on a test's
    /// actor in a test), not on the adapter, so it can use the caller's state without `await`
    /// and return what is not `Sendable`.
    ///
    /// ```swift
    /// let level = try await adapter.withConnection(to: discovery) { peripheral in
    ///     try await peripheral.read(Characteristics.batteryLevel)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - discovery: The peripheral to connect to, as a scan found it.
    ///   - timeout: How long connecting may take, services included.
    ///   - isolation: Where `body` runs; the caller's actor by default.
    ///   - body: What to do with the connected peripheral.
    /// - Returns: What `body` returned.
    /// - Throws: What connecting or `body` throws.
    /// - Important: The peripheral is disconnected even when the task is cancelled (BlueZ would
    ///   otherwise keep the link).
    public func withConnection<T>(
        to discovery: Discovery, timeout: Duration = .seconds(30),
        isolation: isolated (any Actor)? = #isolation, _ body: (Peripheral) async throws -> sending T
    ) async throws -> sending T {
        let peripheral = peripheral(for: discovery)
        try await peripheral.connect(timeout: timeout)
        return try await peripheral.disconnecting(after: body)
    }

    /// Starts advertising, so that centrals find (and, if connectable, connect to) this adapter.
    ///
    /// Several sets can run at once, up to the adapter's free instances
    /// (``AdvertisingCapabilities/availableInstances``). The advertisement is checked against
    /// ``advertisingCapabilities()`` before BlueZ is asked (see ``Advertisement/validate(against:)``).
    ///
    /// The corresponding BlueZ method is `org.bluez.LEAdvertisingManager1.RegisterAdvertisement`.
    /// - Returns: The running advertisement; ``AdvertisingSet/update(_:)`` changes it,
    ///   ``AdvertisingSet/stop()`` ends it.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/valueTooLong`` when the data or the scan
    ///   response does not fit (saying the bytes used and available), ``BluetoothError/Code/invalidArguments``
    ///   for an empty name or a timeout or duration that is not above zero,
    ///   ``BluetoothError/Code/notSupported`` for what the adapter or this BlueZ cannot do (all
    ///   checked before asking BlueZ), ``BluetoothError/Code/notAvailable`` when the controller has
    ///   no free advertising instance, or what else BlueZ answered.
    public func startAdvertising(_ advertisement: Advertisement) async throws -> AdvertisingSet {
        try InputChecks.advertisement(advertisement)
        return try await backend.startAdvertising(advertisement)
    }

    /// Starts scanning for devices.
    ///
    /// Several scans can run at once, on one adapter or several: they share one BlueZ discovery
    /// session per adapter, and each delivers only what its own filter asks for. Discovery stops
    /// in BlueZ when the last scan ends. See ``ScanStream`` for buffering and lifetime.
    ///
    /// The corresponding BlueZ methods are `org.bluez.Adapter1.SetDiscoveryFilter`,
    /// `StartDiscovery` and `StopDiscovery`.
    /// - Parameter filter: What to deliver.
    /// - Returns: The discoveries, as they come.
    /// - Throws: ``BluetoothError`` when BlueZ refuses to start discovery (for example
    ///   ``BluetoothError/Code/notReady`` while the adapter is powered off).
    public func scan(_ filter: ScanFilter = ScanFilter()) async throws -> ScanStream {
        let (stream, continuation) = ScanStream.make(sleep: { [backend] in try await backend.sleep(for: $0) })
        try await backend.scan(filter, into: continuation)
        return stream
    }
}
