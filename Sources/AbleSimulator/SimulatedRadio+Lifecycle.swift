public import AbleCore
import AbleIO
import Synchronization

/// What a simulated adapter remembers of a device besides its bond (kept in the device's
/// `paired` set).
struct KnownDeviceRecord {
    var name: String?
    var isTrusted = false
    var isBlocked = false
}

extension SimulatedRadio {
    // MARK: Adapters that come and go

    /// Every adapter on the radio now, sorted by name: what ``/Able/Adapter/all()`` gives on a
    /// real system.
    public func adapters() -> [Adapter] {
        SimulatedAdapterDirectory(radio: self).adapters().map(Adapter.init(backend:))
    }

    /// The radio's adapters appearing and disappearing: `.added` for every adapter now, then
    /// ``makeAdapter(name:address:mtu:)`` and ``removeAdapter(named:)`` as they happen; what
    /// ``/Able/Adapter/events()`` gives on a real system, with the same buffering (every event
    /// kept until consumed).
    public func adapterEvents() -> AsyncStream<AdapterEvent> {
        SimulatedAdapterDirectory(radio: self).adapterEvents()
    }

    /// Removes an adapter, as unplugging it does: its connections drop, its scans and notification
    /// streams end with ``/Able/BluetoothError/Code/adapterRemoved``, its state becomes absent and
    /// its operations fail until ``makeAdapter(name:address:mtu:)`` adds one of that name again (which
    /// gets the same address back, and makes the ``/Able/Adapter`` values kept for it work again).
    /// Its GATT servers and advertising sets stop serving and advertising, and register again
    /// when it is back, as on BlueZ.
    ///
    /// - Parameter name: The adapter's name, such as `hci1`.
    public func removeAdapter(named name: String) {
        removeAdapter(named: name, error: BluetoothError(.adapterRemoved, message: "adapter \(name) was removed"))
    }

    /// Removes an adapter; what it ends, ends with `error`.
    func removeAdapter(named name: String, error: BluetoothError) {
        let removed = state.withLock { state -> (BluetoothAddress, [RadioState.Scan])? in
            guard let (address, _) = state.adapters.first(where: { $0.value.name == name }) else { return nil }
            state.adapters[address] = nil
            state.removedAdapters[name] = address
            state.devices[address]?.isAdvertising = false
            let scans = state.scans.filter { $0.value.adapter == address }.sorted { $0.key < $1.key }
            for (id, _) in scans { state.scans[id] = nil }
            return (address, scans.map(\.value))
        }
        guard let (address, scans) = removed else { return }
        for scan in scans {
            for token in scan.pendingDeliveries { clock.cancel(token) }
            scan.continuation.finish(throwing: error)
        }
        // Connects under way on the adapter end now.
        let waits = state.withLock { state in
            let ids = state.adapterWaits.filter { $0.value.adapter == address }.keys
            return ids.compactMap { state.adapterWaits.removeValue(forKey: $0) }
        }
        for wait in waits { wait.continuation.resume() }
        let connections = state.withLock { state in
            state.connections.filter { $0.central == address || $0.peripheral == address }
                .sorted { ($0.central, $0.peripheral) < ($1.central, $1.peripheral) }
        }
        for connection in connections {
            disconnect(central: connection.central, peripheral: connection.peripheral, reason: error)
        }
        let listeners = state.withLock { state in
            (Array((state.adapterListeners[address] ?? [:]).values), Array(state.adapterEventListeners.values))
        }
        for listener in listeners.0 { listener.yield(.absent(name)) }
        for listener in listeners.1 { listener.yield(.removed(name: name)) }
        registrationsWent(from: address, error)
    }

    /// Tells the adapter event listeners and the adapter's state listeners that it is present.
    func adapterAdded(_ address: BluetoothAddress) {
        let adapter = state.withLock { state in
            state.adapters[address].map { (name: $0.name, listeners: Array(state.adapterEventListeners.values)) }
        }
        guard let adapter else { return }
        let added = Adapter(backend: SimulatedAdapterBackend(radio: self, name: adapter.name, address: address))
        for listener in adapter.listeners { listener.yield(.added(added)) }
        adapterChanged(address)
    }

    // MARK: Known devices

    /// Makes `adapter` remember `device` (a scan found it, a connection or a pairing made it known).
    func remember(_ device: BluetoothAddress, by adapter: BluetoothAddress) {
        let (added, listeners) = state.withLock {
            state -> (KnownPeripheral?, [AsyncStream<KnownPeripheralEvent>.Continuation]) in
            guard state.knownDevices[adapter]?[device] == nil else { return (nil, []) }
            state.knownDevices[adapter, default: [:]][device] = KnownDeviceRecord(
                name: state.devices[device]?.advertisement?.localName)
            return (
                state.knownPeripheral(device, by: adapter),
                Array((state.knownDeviceListeners[adapter] ?? [:]).values)
            )
        }
        guard let added else { return }
        for listener in listeners { listener.yield(.added(added)) }
    }

    /// Makes `adapter` forget `device`: its bond, trust and block go, its connection drops.
    func forget(_ device: BluetoothAddress, by adapter: BluetoothAddress) throws {
        let listeners = try state.withLock { state in
            guard state.knownDevices[adapter]?.removeValue(forKey: device) != nil else {
                throw BluetoothError(.doesNotExist, message: "\(device) is not known to the adapter")
            }
            state.devices[device]?.paired.remove(adapter)
            state.devices[device]?.authenticated.remove(adapter)
            return Array((state.knownDeviceListeners[adapter] ?? [:]).values)
        }
        disconnect(
            central: adapter, peripheral: device,
            reason: BluetoothError(.disconnected, message: "the device was removed"))
        for listener in listeners { listener.yield(.removed(device)) }
    }
}

extension RadioState {
    /// What `adapter` knows of `device`, or `nil` when it does not know it.
    func knownPeripheral(_ device: BluetoothAddress, by adapter: BluetoothAddress) -> KnownPeripheral? {
        guard let record = knownDevices[adapter]?[device] else { return nil }
        let bonded = devices[device]?.paired.contains(adapter) == true
        return KnownPeripheral(
            address: device, addressType: .public, name: record.name, isPaired: bonded, isBonded: bonded,
            isTrusted: record.isTrusted, isBlocked: record.isBlocked,
            isConnected: connections.contains(Connection(central: adapter, peripheral: device)))
    }
}

/// A simulated radio's adapters, listed and followed.
struct SimulatedAdapterDirectory: AdapterDirectory {
    let radio: SimulatedRadio

    func adapters() -> [any AdapterBackend] {
        radio.state.withLock { state in
            state.adapters.values.sorted { $0.name < $1.name }.map {
                SimulatedAdapterBackend(radio: radio, name: $0.name, address: $0.address)
            }
        }
    }

    func adapterEvents() -> AsyncStream<AdapterEvent> {
        let (stream, continuation) = AsyncStream<AdapterEvent>.makeStream()
        let id = radio.state.withLock { state in
            // Under the lock, so that no change slips in between the list and the listening.
            for adapter in state.adapters.values.sorted(by: { $0.name < $1.name }) {
                continuation.yield(
                    .added(
                        Adapter(
                            backend: SimulatedAdapterBackend(radio: radio, name: adapter.name, address: adapter.address)
                        )))
            }
            let id = state.makeID()
            state.adapterEventListeners[id] = continuation
            return id
        }
        continuation.onTermination = { [radio] _ in
            _ = radio.state.withLock { $0.adapterEventListeners.removeValue(forKey: id) }
        }
        return stream
    }
}

extension SimulatedAdapterBackend: KnownPeripheralsBackend {
    func knownPeripherals() -> [KnownPeripheral] {
        radio.state.withLock { state in
            (state.knownDevices[address] ?? [:]).keys.sorted().compactMap { state.knownPeripheral($0, by: address) }
        }
    }

    func knownPeripheralEvents() -> AsyncStream<KnownPeripheralEvent> {
        let (stream, continuation) = AsyncStream<KnownPeripheralEvent>.makeStream()
        let id = radio.state.withLock { state in
            for device in (state.knownDevices[address] ?? [:]).keys.sorted() {
                if let known = state.knownPeripheral(device, by: address) { continuation.yield(.added(known)) }
            }
            let id = state.makeID()
            state.knownDeviceListeners[address, default: [:]][id] = continuation
            return id
        }
        continuation.onTermination = { [radio, address] _ in
            _ = radio.state.withLock { $0.knownDeviceListeners[address]?.removeValue(forKey: id) }
        }
        return stream
    }
}

extension SimulatedPeripheralBackend: BondBackend {
    var knownPeripheral: KnownPeripheral? {
        radio.state.withLock { $0.knownPeripheral(address, by: central) }
    }

    func setTrusted(_ trusted: Bool) async throws {
        try update { $0.isTrusted = trusted }
    }

    func setBlocked(_ blocked: Bool) async throws {
        try update { $0.isBlocked = blocked }
        if blocked {
            radio.disconnect(
                central: central, peripheral: address,
                reason: BluetoothError(.locallyDisconnected, message: "the device was blocked"))
        }
    }

    func forget() async throws {
        try radio.forget(address, by: central)
    }

    private func update(_ change: (inout KnownDeviceRecord) -> Void) throws {
        try radio.state.withLock { state in
            guard state.knownDevices[central]?[address] != nil else {
                throw BluetoothError(.doesNotExist, message: "\(address) is not known to the adapter")
            }
            change(&state.knownDevices[central]![address]!)
        }
    }
}

extension SimulatedRadio {
    /// Sleeps until `deadline` in simulated time, as a connect of `adapter`'s waits for its
    /// device; ends early, with ``/Able/BluetoothError/Code/adapterRemoved``, when the adapter is
    /// removed meanwhile, as BlueZ ends a `Connect` under way when its adapter goes.
    ///
    /// The sleep is the clock's own (the simulation sees it as any other), in a child task that
    /// the removal's waiter, its sibling, outlives or cancels.
    ///
    /// - Throws: ``/Able/BluetoothError/Code/adapterRemoved``, or `CancellationError` when the
    ///   task is cancelled first.
    func sleep(until deadline: SimulatedClock.Instant, whileAdapterPresent adapter: BluetoothAddress) async throws {
        let removed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await self.clock.sleep(until: deadline)
                return false
            }
            group.addTask {
                try await self.untilRemoved(adapter)
                return true
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
        if removed {
            throw state.withLock { $0.absence(of: adapter, "the adapter was removed while connecting") }
        }
    }

    /// Returns when `adapter` is removed (at once if it is absent).
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    private func untilRemoved(_ adapter: BluetoothAddress) async throws {
        let id = state.withLock { $0.makeID() }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
                let waiting = state.withLock { state -> Bool? in
                    // Cancellation sets the flag before `onCancel` takes the lock.
                    guard !Task.isCancelled else { return nil }
                    guard state.adapters[adapter] != nil else { return false }
                    state.adapterWaits[id] = RadioState.AdapterWait(adapter: adapter, continuation: continuation)
                    return true
                }
                switch waiting {
                case nil: continuation.resume(throwing: CancellationError())
                case false?: continuation.resume()
                case true?: break
                }
            }
        } onCancel: {
            state.withLock { $0.adapterWaits.removeValue(forKey: id) }?.continuation.resume(
                throwing: CancellationError())
        }
    }
}
