import AbleCore
import AbleDBus
import AbleIO

extension BlueZAdapterBackend {
    static let advertisingManager = "org.bluez.LEAdvertisingManager1"

    func startAdvertising(_ advertisement: Advertisement) async throws -> AdvertisingSet {
        let capabilities = try await advertisingCapabilities()
        try advertisement.validate(against: capabilities)
        let registration = BlueZAdvertisement(adapter: self, scanResponseFields: capabilities.supportsScanResponseData)
        try await registration.register(advertisement)
        registration.followStack()
        return AdvertisingSet(
            advertisement, released: registration.released,
            update: { try await registration.update($0) },
            stop: { await registration.stop() })
    }

    func advertisingCapabilities() async throws -> AdvertisingCapabilities {
        guard let interfaces = system.tree.interfaces(at: path) else {
            throw BluetoothError(
                system.tree.owner == nil ? .daemonUnavailable : .notAvailable, message: "adapter \(name) is not present"
            )
        }
        guard let manager = interfaces[Self.advertisingManager] else {
            throw BluetoothError(.notSupported, message: "BlueZ offers no LE advertising on \(name)")
        }
        return Self.capabilities(
            manager: manager, monitorManager: interfaces["org.bluez.AdvertisementMonitorManager1"],
            adapter: interfaces[Self.interface] ?? [:])
    }

    /// Reads the capabilities from `LEAdvertisingManager1`'s properties.
    ///
    /// BlueZ says nothing of its version or of `-E` on the bus, so both are read from what it
    /// exports: `AdvertisementMonitorManager1.SupportedMonitorTypes` is experimental on every
    /// version, `SupportedCapabilities` is experimental before 5.77, and the adapter's
    /// `Manufacturer` property (BlueZ 5.7x) marks a BlueZ that extends advertising by itself.
    static func capabilities(
        manager: [String: DBusVariant], monitorManager: [String: DBusVariant]?, adapter: [String: DBusVariant]
    ) -> AdvertisingCapabilities {
        let capabilities = try? manager.decode("SupportedCapabilities", as: [String: DBusVariant].self)
        let features = (try? manager.decode("SupportedFeatures", as: [String].self)) ?? []
        let experimental = monitorManager?["SupportedMonitorTypes"] != nil
        let modern = adapter["Manufacturer"] != nil
        var txPowerRange: ClosedRange<Int>?
        if let low = try? capabilities?.decode("MinTxPower", as: Int16.self),
            let high = try? capabilities?.decode("MaxTxPower", as: Int16.self), low <= high
        {
            txPowerRange = Int(low)...Int(high)
        }
        return AdvertisingCapabilities(
            availableInstances: Int((try? manager.decode("SupportedInstances", as: UInt8.self)) ?? 0),
            activeInstances: Int((try? manager.decode("ActiveInstances", as: UInt8.self)) ?? 0),
            maximumAdvertisingDataLength: Int(
                (try? capabilities?.decode("MaxAdvLen", as: UInt8.self)) ?? UInt8(AdvertisementData.legacyMaximumLength)
            ),
            maximumScanResponseLength: Int(
                (try? capabilities?.decode("MaxScnRspLen", as: UInt8.self))
                    ?? UInt8(AdvertisementData.legacyMaximumLength)),
            txPowerRange: txPowerRange,
            includes: Set(
                ((try? manager.decode("SupportedIncludes", as: [String].self)) ?? []).map(
                    AdvertisingCapabilities.Include.init)),
            secondaryChannels: Set(
                ((try? manager.decode("SupportedSecondaryChannels", as: [String].self)) ?? []).map(
                    AdvertisingPHY.init)),
            canSetTxPower: features.contains("CanSetTxPower"),
            supportsParameters: capabilities != nil,
            supportsScanResponseData: experimental && modern,
            extendsAutomatically: modern)
    }

    /// Says what BlueZ's terse refusals mean.
    static func explain(_ error: BluetoothError) -> BluetoothError {
        var explained = error
        switch error.errorName {
        case "org.bluez.Error.NotPermitted" where error.message.contains("Maximum"):
            explained.code = .notAvailable
            explained.message = "no free advertising instance: \(error.message)"
        case "org.bluez.Error.Failed" where error.message.contains("register advertisement"):
            explained.code = .valueTooLong
            explained.message = "BlueZ refused the advertisement (usually: its data does not fit): \(error.message)"
        case "org.bluez.Error.InvalidLength":
            explained.code = .valueTooLong
            explained.message = "the advertising data is too long for the controller: \(error.message)"
        default:
            break
        }
        return explained
    }

    /// The `org.bluez.LEAdvertisement1` properties of an advertisement.
    ///
    /// - Parameter scanResponseFields: Whether to send the scan response's fields (BlueZ 5.80
    ///   and later with `-E`; others ignore them).
    static func advertisementProperties(
        _ advertisement: Advertisement, scanResponseFields: Bool
    ) -> [String: DBusValue] {
        var properties: [String: DBusValue] = [
            "Type": .string(advertisement.isConnectable ? "peripheral" : "broadcast")
        ]
        // BlueZ's documentation: Discoverable "shall not be set when Type is set to broadcast"
        // (5.82 refuses the advertisement: "Failed to parse advertisement").
        if advertisement.isConnectable { properties["Discoverable"] = .boolean(advertisement.isDiscoverable) }
        func uuids(_ list: [BluetoothUUID]) -> DBusValue { list.map(\.uuidString).dbusValue }
        func manufacturer(_ data: [UInt16: [UInt8]]) -> DBusValue { data.mapValues { DBusVariant($0) }.dbusValue }
        func service(_ data: [BluetoothUUID: [UInt8]]) -> DBusValue {
            Dictionary(uniqueKeysWithValues: data.map { ($0.key.uuidString, DBusVariant($0.value)) }).dbusValue
        }
        if !advertisement.serviceUUIDs.isEmpty { properties["ServiceUUIDs"] = uuids(advertisement.serviceUUIDs) }
        if !advertisement.solicitedUUIDs.isEmpty { properties["SolicitUUIDs"] = uuids(advertisement.solicitedUUIDs) }
        if let name = advertisement.localName { properties["LocalName"] = .string(name) }
        if let appearance = advertisement.appearance { properties["Appearance"] = .uint16(appearance) }
        if advertisement.includesTxPower { properties["Includes"] = ["tx-power"].dbusValue }
        if !advertisement.manufacturerData.isEmpty {
            properties["ManufacturerData"] = manufacturer(advertisement.manufacturerData)
        }
        if !advertisement.serviceData.isEmpty { properties["ServiceData"] = service(advertisement.serviceData) }
        if let timeout = advertisement.timeout {
            properties["Timeout"] = .uint16(UInt16(clamping: timeout.components.seconds))
        }
        if let duration = advertisement.duration {
            properties["Duration"] = .uint16(UInt16(clamping: duration.components.seconds))
        }
        if let interval = advertisement.interval {
            func milliseconds(_ duration: Duration) -> UInt32 {
                UInt32(
                    clamping: duration.components.seconds * 1000 + duration.components.attoseconds
                        / 1_000_000_000_000_000)
            }
            properties["MinInterval"] = .uint32(milliseconds(interval.lowerBound))
            properties["MaxInterval"] = .uint32(milliseconds(interval.upperBound))
        }
        if let txPower = advertisement.txPower { properties["TxPower"] = .int16(Int16(clamping: txPower)) }
        if let channel = advertisement.secondaryChannel { properties["SecondaryChannel"] = .string(channel.rawValue) }
        if scanResponseFields {
            let response = advertisement.scanResponse
            if !response.serviceUUIDs.isEmpty { properties["ScanResponseServiceUUIDs"] = uuids(response.serviceUUIDs) }
            if !response.solicitedUUIDs.isEmpty {
                properties["ScanResponseSolicitUUIDs"] = uuids(response.solicitedUUIDs)
            }
            if !response.manufacturerData.isEmpty {
                properties["ScanResponseManufacturerData"] = manufacturer(response.manufacturerData)
            }
            if !response.serviceData.isEmpty { properties["ScanResponseServiceData"] = service(response.serviceData) }
        }
        return properties
    }

    /// Properties whose change BlueZ cannot apply to a running advertisement as it is: a change
    /// of them registers the advertisement again.
    static let advertisingParameters: Set<String> = [
        "Type", "Timeout", "Duration", "MinInterval", "MaxInterval", "TxPower", "SecondaryChannel",
    ]
}

/// One advertisement registered with BlueZ: an exported `org.bluez.LEAdvertisement1` object
/// whose properties follow ``AdvertisingSet/update(_:)``.
///
/// It outlives `bluetoothd`: when the daemon leaves the bus or the adapter's
/// `LEAdvertisingManager1` goes, the registration is gone (BlueZ may call `Release` on its way
/// out); the object stays exported, and when the manager is back (`InterfacesAdded`) it is
/// registered again, accepting calls from the new daemon only. A `Release` of an advertisement
/// with a ``Advertisement/timeout`` or ``Advertisement/duration`` ends the set at once: it is
/// BlueZ saying the time is up. Any other `Release` ends it only if the daemon and the adapter's
/// manager are still there ``BlueZAdapterBackend/daemonExitGrace`` later.
final class BlueZAdvertisement: Sendable {
    private struct State {
        var path: DBusObjectPath?
        var properties: [String: DBusValue] = [:]
        var stopped = false
        /// The unique bus name of the `bluetoothd` the advertisement is registered with.
        var bluez: String?
        /// Whether the stack took the registration away (the daemon or the adapter went).
        var interrupted = false
    }

    let adapter: BlueZAdapterBackend
    let scanResponseFields: Bool
    /// Set when BlueZ releases the current registration (not one this object replaced).
    let released = ReleaseFlag()
    private let state = Lock(State())
    /// Runs updates, registrations again and the stop one after another.
    private let queue = FIFOLock()
    /// Follows the stack (``followStack()``) until the set stops.
    private let watcher = Lock<Task<Void, Never>?>(nil)

    init(adapter: BlueZAdapterBackend, scanResponseFields: Bool) {
        self.adapter = adapter
        self.scanResponseFields = scanResponseFields
    }

    /// Exports the advertisement at a new path and registers it.
    func register(_ advertisement: Advertisement) async throws {
        let properties = BlueZAdapterBackend.advertisementProperties(
            advertisement, scanResponseFields: scanResponseFields)
        let system = adapter.system
        let connection = system.connection
        let path = DBusObjectPath.unique("/able/advertisement_")
        let bluez = try await connection.nameOwner(of: BlueZSystem.service)
        state.withLock {
            $0.path = path
            $0.properties = properties
            $0.bluez = bluez
        }
        try await connection.export(
            [interface(at: path, properties.keys)], at: path,
            authorize: { [state] caller in state.withLock { $0.bluez == caller } })
        do {
            _ = try await system.call(
                adapter.path, BlueZAdapterBackend.advertisingManager, "RegisterAdvertisement",
                [.objectPath(path), .dictionary(key: .string, value: .variant, [])])
        } catch {
            // BlueZ may have registered the advertisement although its answer did not reach us (the
            // task was cancelled while waiting): unregister it, from a task that is not cancelled.
            await system.callEvenIfCancelled(
                adapter.path, BlueZAdapterBackend.advertisingManager, "UnregisterAdvertisement", [.objectPath(path)])
            await connection.unexport(path)
            state.withLock { $0.path = nil }
            throw (error as? BluetoothError).map(BlueZAdapterBackend.explain) ?? error
        }
    }

    /// The exported interface at `path`; its properties read the current state.
    private func interface(at path: DBusObjectPath, _ names: some Sequence<String>) -> DBusInterface {
        let properties = names.sorted().map { name in
            let signature = state.withLock { $0.properties[name]!.signature }
            return DBusProperty(name, signature: signature) { [state] in
                guard let value = state.withLock({ $0.properties[name] }) else {
                    throw DBusError(.invalidArgs, "no property \(name)")
                }
                return value
            }
        }
        return DBusInterface(
            "org.bluez.LEAdvertisement1",
            methods: [
                .immediate("Release") { [state, released, adapter] _ in
                    // A Release for a registration that an update replaced is not the set's end.
                    // One without a timeout or duration is the set's end only if the stack stays:
                    // a stopping bluetoothd releases every advertisement before it removes the
                    // adapter and leaves the bus, and the set comes back with the next one.
                    let ends = state.withLock { state -> Bool? in
                        guard state.path == path else { return false }
                        guard state.properties["Timeout"] != nil || state.properties["Duration"] != nil else {
                            state.interrupted = true
                            return nil
                        }
                        return true
                    }
                    switch ends {
                    case true?: released.set()
                    case false?: break
                    case nil:
                        let tree = adapter.system.tree
                        let owner = tree.owner
                        Task {
                            try? await Task.sleep(for: BlueZAdapterBackend.daemonExitGrace)
                            let stayed =
                                tree.owner == owner
                                && tree.interfaces(at: adapter.path)?[BlueZAdapterBackend.advertisingManager] != nil
                            if stayed, state.withLock({ $0.interrupted && $0.path == path }) { released.set() }
                        }
                    }
                    return []
                }
            ], properties: properties)
    }

    func update(_ advertisement: Advertisement) async throws {
        try await queue.withLock {
            let (current, path, stopped) = state.withLock { ($0.properties, $0.path, $0.stopped) }
            guard !stopped, let path, !released.value else {
                throw BluetoothError(.notAvailable, message: "the advertising set was stopped or released by BlueZ")
            }
            var capabilities = try await adapter.advertisingCapabilities()
            capabilities.availableInstances += 1  // this set's own
            try advertisement.validate(against: capabilities)
            let properties = BlueZAdapterBackend.advertisementProperties(
                advertisement, scanResponseFields: scanResponseFields)
            let sameShape =
                Set(properties.keys) == Set(current.keys)
                && BlueZAdapterBackend.advertisingParameters.allSatisfy { properties[$0] == current[$0] }
            if sameShape {
                let changed = properties.filter { current[$0.key] != $0.value }
                guard !changed.isEmpty else { return }
                state.withLock { $0.properties = properties }
                adapter.system.connection.emitPropertiesChanged(
                    path: path, interface: "org.bluez.LEAdvertisement1", changed: changed)
            } else {
                await unregister(path)
                do {
                    try await register(advertisement)
                } catch {
                    // Off the air now: the set has ended, as if BlueZ had released it.
                    released.set()
                    throw error
                }
            }
        }
    }

    private func unregister(_ path: DBusObjectPath) async {
        state.withLock { if $0.path == path { $0.path = nil } }
        if !released.value {
            await adapter.system.callEvenIfCancelled(
                adapter.path, BlueZAdapterBackend.advertisingManager, "UnregisterAdvertisement", [.objectPath(path)])
        }
        await adapter.system.connection.unexport(path)
    }

    /// Follows the stack under the advertisement: when `bluetoothd` leaves or the adapter's
    /// `LEAdvertisingManager1` goes, the registration is gone; when the manager is back, the
    /// advertisement registers again.
    func followStack() {
        let changes = adapter.system.tree.changes()
        let adapterPath = adapter.path
        let task = Task { [weak self] in
            for await change in changes {
                // A set BlueZ ended (its time is up) has nothing to follow.
                guard let released = self?.released, !released.value else { return }
                switch change {
                case .serviceLeft:
                    self?.state.withLock { $0.interrupted = true }
                case .interfacesRemoved(adapterPath, let names)
                where names.contains(BlueZAdapterBackend.advertisingManager):
                    self?.state.withLock { $0.interrupted = true }
                case .interfacesAdded(adapterPath, let interfaces)
                where interfaces[BlueZAdapterBackend.advertisingManager] != nil:
                    guard let self else { return }
                    await self.registerAgain()
                default:
                    continue
                }
            }
        }
        watcher.withLock { $0 = task }
    }

    /// Registers the advertisement again, at its path, with the `bluetoothd` now on the bus, a
    /// few times if it refuses at first (it may still be setting the adapter up).
    private func registerAgain() async {
        try? await queue.withLock {
            for attempt in 0..<5 {
                if attempt > 0 { try? await Task.sleep(for: .seconds(1)) }
                let system = adapter.system
                let path = state.withLock { state -> DBusObjectPath? in
                    guard !state.stopped, state.interrupted, let path = state.path else { return nil }
                    return path
                }
                guard let path, !released.value, !Task.isCancelled,
                    system.tree.interfaces(at: adapter.path)?[BlueZAdapterBackend.advertisingManager] != nil,
                    let owner = system.tree.owner
                else { return }
                state.withLock { $0.bluez = owner }
                do {
                    _ = try await system.call(
                        adapter.path, BlueZAdapterBackend.advertisingManager, "RegisterAdvertisement",
                        [.objectPath(path), .dictionary(key: .string, value: .variant, [])])
                    state.withLock { $0.interrupted = false }
                    return
                } catch let error as BluetoothError where error.errorName == "org.bluez.Error.AlreadyExists" {
                    state.withLock { $0.interrupted = false }
                    return
                } catch {
                    continue
                }
            }
        }
    }

    func stop() async {
        watcher.withLock { $0?.cancel() }
        try? await queue.withLock {
            let path = state.withLock { state in
                state.stopped = true
                return state.path
            }
            if let path { await unregister(path) }
        }
    }
}
