import AbleCore
import AbleIO

/// The simulator's adapters.
struct SimulatedAdapterBackend: AdapterBackend {
    let radio: SimulatedRadio
    let name: String
    let address: BluetoothAddress

    var currentState: Adapter.State {
        radio.state.withLock { state in
            let discovering = state.scans.values.contains { $0.adapter == address }
            return state.adapters[address]?.publicState(discovering: discovering) ?? .absent(name)
        }
    }

    func set(_ change: AdapterChange) async throws {
        try radio.state.withLock { state in
            guard state.adapters[address] != nil else {
                throw state.absence(of: address, "adapter \(name) was removed")
            }
            switch change {
            case .powered(let on): state.adapters[address]?.isPowered = on
            case .discoverable(let on): state.adapters[address]?.isDiscoverable = on
            case .pairable(let on): state.adapters[address]?.isPairable = on
            case .alias(let alias): state.adapters[address]?.alias = alias
            }
        }
        if case .powered(false) = change { radio.poweredOff(address) }
        radio.adapterChanged(address)
    }

    func stateChanges() -> AsyncStream<Adapter.State> {
        let (stream, continuation) = AsyncStream<Adapter.State>.makeStream(bufferingPolicy: .bufferingNewest(1))
        continuation.yield(currentState)
        let id = radio.state.withLock { state in
            let id = state.makeID()
            state.adapterListeners[address, default: [:]][id] = continuation
            return id
        }
        continuation.onTermination = { [radio, address] _ in
            _ = radio.state.withLock { $0.adapterListeners[address]?.removeValue(forKey: id) }
        }
        return stream
    }

    func scan(_ filter: ScanFilter, into continuation: ScanStream.Continuation) async throws {
        try await scan(filter, passive: nil, into: continuation)
    }

    func passiveScan(_ filter: PassiveScanFilter, into continuation: ScanStream.Continuation) async throws {
        guard radio.state.withLock({ $0.adapters[address]?.supportsPassiveScanning == true }) else {
            throw BluetoothError(
                .notSupported,
                message: "BlueZ offers no advertisement monitor (or_patterns) on \(name): BlueZ 5.66 and 5.82 export "
                    + "AdvertisementMonitorManager1 only with their experimental interfaces (bluetoothd -E)")
        }
        try await scan(ScanFilter(), passive: filter, into: continuation)
    }

    private func scan(
        _ filter: ScanFilter, passive: PassiveScanFilter?, into continuation: ScanStream.Continuation
    ) async throws {
        let (id, devices) = try radio.state.withLock { state in
            guard state.adapters[address] != nil else {
                throw state.absence(of: address, "adapter \(name) was removed")
            }
            guard state.adapters[address]?.isPowered == true else {
                throw BluetoothError(.notReady, message: "\(name) is powered off")
            }
            let id = state.makeID()
            state.scans[id] = RadioState.Scan(
                adapter: address, filter: filter, continuation: continuation, passive: passive)
            return (id, state.devices.values.sorted { $0.address < $1.address })
        }
        radio.record(.scanStarted, "\(address)" + (passive == nil ? "" : " passive"))
        continuation.setHandOffObserver { [clock = radio.clock] in clock.handOffEnded() }
        continuation.onTermination { [radio] in
            let scan = radio.state.withLock { $0.scans.removeValue(forKey: id) }
            if scan != nil { radio.record(.scanEnded, "\(address)") }
            for token in scan?.pendingDeliveries ?? [] { radio.clock.cancel(token) }
            radio.adapterChanged(address)
            // A value it held for its consumer no longer holds time back.
            radio.clock.handOffEnded()
        }
        radio.adapterChanged(address)
        // Each device is seen one advertising interval after the scan starts.
        for device in devices where device.address != address {
            radio.scheduleDelivery(of: device.address, to: id, after: device.timing.advertisingInterval)
        }
    }

    func sleep(for duration: Duration) async throws {
        try await radio.clock.sleep(for: duration)
    }

    func peripheral(
        address peripheral: BluetoothAddress, addressType: BluetoothAddress.AddressType?
    ) -> any PeripheralBackend {
        SimulatedPeripheralBackend(radio: radio, central: address, address: peripheral, addressType: addressType)
    }

    func gattServerBackend() async throws -> any GATTServerBackend {
        SimulatedGATTServerBackend(radio: radio, address: address)
    }

    /// Starts an advertising set. It outlives a stack restart (``SimulatedRadio/stopStack()``):
    /// it goes off the air with the stack and comes back on, under the same set, when the stack
    /// and the adapter are back, as on BlueZ.
    func startAdvertising(_ advertisement: Advertisement) async throws -> AdvertisingSet {
        let id = try radio.state.withLock { state in
            guard state.adapters[address] != nil else {
                throw state.absence(of: address, "adapter \(name) was removed")
            }
            try advertisement.validate(against: state.advertisingCapabilities(of: address))
            let id = state.makeID()
            state.addAdvertisingSet(id, advertisement, on: address)
            return id
        }
        radio.announce(address)
        // What the set advertises now, for registering it again after a stack restart.
        let current = Lock(advertisement)
        let listener = radio.addStackListener(
            StackListener(
                adapter: address,
                down: { _ in },
                up: { [radio, address] in
                    let added = radio.state.withLock { state in
                        guard state.adapters[address] != nil else { return false }
                        state.addAdvertisingSet(id, current.withLock { $0 }, on: address)
                        return true
                    }
                    if added { radio.announce(address) }
                }))
        return AdvertisingSet(
            advertisement, released: ReleaseFlag(),
            update: { [radio, address] in
                try radio.updateAdvertisingSet(id, of: address, to: $0)
                current.withLock { [new = $0] in $0 = new }
            },
            stop: { [radio, address] in
                radio.removeStackListener(listener)
                radio.stopAdvertisingSet(id, of: address)
            })
    }

    func advertisingCapabilities() async throws -> AdvertisingCapabilities {
        try radio.state.withLock { state in
            guard state.adapters[address] != nil else {
                throw state.absence(of: address, "adapter \(name) was removed")
            }
            return state.advertisingCapabilities(of: address)
        }
    }
}
