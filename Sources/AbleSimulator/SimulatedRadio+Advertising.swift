public import AbleCore
import AbleIO
import Synchronization

extension SimulatedRadio {
    /// What a simulated adapter's advertising can do unless a test says otherwise: what BlueZ
    /// 5.82 reports for the emulated controllers of Able's test guest (`btvirt`): five legacy
    /// advertising instances of 31 bytes of advertising data and 31 of scan response, the
    /// TX power, appearance and local name includes, and no extended advertising.
    public static let defaultAdvertisingCapabilities = AdvertisingCapabilities(
        availableInstances: 5, includes: [.txPower, .appearance, .localName], supportsParameters: true,
        extendsAutomatically: true)

    /// Makes a simulated adapter report, and enforce, other advertising capabilities: another
    /// BlueZ version or controller.
    ///
    /// - Parameters:
    ///   - capabilities: What the adapter offers; ``/Able/AdvertisingCapabilities/availableInstances``
    ///     counts every instance of the adapter (those its running sets use are subtracted), and
    ///     ``/Able/AdvertisingCapabilities/activeInstances`` is ignored.
    ///   - adapter: The simulated adapter, from ``makeAdapter(name:address:mtu:)``.
    public func setAdvertisingCapabilities(_ capabilities: AdvertisingCapabilities, of adapter: Adapter) {
        state.withLock { state in
            for (address, simulated) in state.adapters where simulated.name == adapter.name {
                state.adapters[address]?.advertising = capabilities
            }
        }
    }

    /// Makes a simulated adapter offer passive scanning (``/Able/Adapter/passiveScan(_:)``), as
    /// BlueZ does with its experimental interfaces, or not, as it does by default.
    public func setPassiveScanning(_ supported: Bool, of adapter: Adapter) {
        state.withLock { state in
            for (address, simulated) in state.adapters where simulated.name == adapter.name {
                state.adapters[address]?.supportsPassiveScanning = supported
            }
        }
    }

    /// Replaces a running set's advertisement; scans see the new data one advertising interval later.
    func updateAdvertisingSet(_ id: UInt64, of adapter: BluetoothAddress, to advertisement: Advertisement) throws {
        try state.withLock { state in
            guard let index = state.adapters[adapter]?.advertisingSets.firstIndex(where: { $0.id == id }) else {
                throw BluetoothError(.notAvailable, message: "the advertising set was stopped")
            }
            var capabilities = state.advertisingCapabilities(of: adapter)
            capabilities.availableInstances += 1
            try advertisement.validate(against: capabilities)
            state.adapters[adapter]!.advertisingSets[index].advertisement = advertisement
            state.devices[adapter]?.advertisement = state.adapters[adapter]!.advertisingSets.last!.advertisement
        }
        announce(adapter)
    }

    /// Ends a running set; the adapter keeps advertising its other sets.
    func stopAdvertisingSet(_ id: UInt64, of adapter: BluetoothAddress) {
        state.withLock { state in
            state.adapters[adapter]?.advertisingSets.removeAll { $0.id == id }
            if let newest = state.adapters[adapter]?.advertisingSets.last {
                state.devices[adapter]?.advertisement = newest.advertisement
            } else {
                state.devices[adapter]?.isAdvertising = false
            }
        }
    }
}

extension RadioState {
    /// Puts an advertising set on the air: the newest set is what scans see.
    mutating func addAdvertisingSet(_ id: UInt64, _ advertisement: Advertisement, on adapter: BluetoothAddress) {
        if devices[adapter] == nil {
            devices[adapter] = SimulatedDevice(
                address: adapter, advertisement: nil, rssi: -40, mtu: serverMTU(of: adapter))
        }
        adapters[adapter]?.advertisingSets.append((id, advertisement))
        devices[adapter]?.advertisement = advertisement
        devices[adapter]?.isAdvertising = true
    }

    /// A simulated adapter's advertising capabilities now, its running sets subtracted.
    func advertisingCapabilities(of adapter: BluetoothAddress) -> AdvertisingCapabilities {
        guard let state = adapters[adapter] else { return AdvertisingCapabilities(availableInstances: 0) }
        var capabilities = state.advertising
        capabilities.activeInstances = state.advertisingSets.count
        capabilities.availableInstances = max(0, capabilities.availableInstances - state.advertisingSets.count)
        return capabilities
    }
}
