import AbleCore
import AbleDBus

extension BlueZAdapterBackend: KnownPeripheralsBackend {
    func knownPeripherals() -> [KnownPeripheral] {
        system.tree.objects.compactMap { devicePath, interfaces -> KnownPeripheral? in
            guard devicePath.parent == path, let properties = interfaces[BlueZPeripheralBackend.device] else {
                return nil
            }
            return KnownPeripheral(bluezDevice: properties)
        }.sorted { $0.address < $1.address }
    }

    func knownPeripheralEvents() -> AsyncStream<KnownPeripheralEvent> {
        let (stream, continuation) = AsyncStream<KnownPeripheralEvent>.makeStream()
        // Listen before listing, so that nothing between the two is missed.
        let changes = system.tree.changes()
        var known = Set<BluetoothAddress>()
        for peripheral in knownPeripherals() {
            known.insert(peripheral.address)
            continuation.yield(.added(peripheral))
        }
        let task = Task { [system, path, known] in
            var known = known
            for await change in changes {
                switch change {
                case .interfacesAdded(let device, let interfaces) where device.parent == path:
                    guard interfaces[BlueZPeripheralBackend.device] != nil,
                        let properties = system.tree.properties(of: BlueZPeripheralBackend.device, at: device)
                            ?? interfaces[BlueZPeripheralBackend.device],
                        let peripheral = KnownPeripheral(bluezDevice: properties),
                        known.insert(peripheral.address).inserted
                    else { continue }
                    continuation.yield(.added(peripheral))
                case .interfacesRemoved(let device, let interfaces)
                where device.parent == path && interfaces.contains(BlueZPeripheralBackend.device):
                    guard let address = BluetoothAddress(bluezDevicePath: device),
                        known.remove(address) != nil
                    else { continue }
                    continuation.yield(.removed(address))
                default:
                    continue
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

extension KnownPeripheral {
    /// A known device from the properties of its `org.bluez.Device1` object; `nil` without an address.
    init?(bluezDevice properties: [String: DBusVariant]) {
        func value<T: DBusRepresentable>(_ key: String, _ fallback: T) -> T {
            ((try? properties.decode(key, as: T.self)) ?? nil) ?? fallback
        }
        guard let address = BluetoothAddress(value("Address", "")) else { return nil }
        let paired: Bool = value("Paired", false)
        let name: String? = (try? properties.decode("Alias", as: String.self)) ?? nil
        self.init(
            address: address, addressType: BluetoothAddress.AddressType(rawValue: value("AddressType", "public")),
            // BlueZ's Alias falls back to the address, with dashes, when the device has no name.
            name: name.flatMap { String($0.map { $0 == "-" ? ":" : $0 }) == address.description ? nil : $0 },
            // BlueZ before 5.63 has no Bonded: a pairing there is always stored.
            isPaired: paired, isBonded: value("Bonded", paired), isTrusted: value("Trusted", false),
            isBlocked: value("Blocked", false), isConnected: value("Connected", false))
    }
}

extension BlueZPeripheralBackend: BondBackend {
    var knownPeripheral: KnownPeripheral? {
        system.tree.properties(of: Self.device, at: path).flatMap(KnownPeripheral.init(bluezDevice:))
    }

    func setTrusted(_ trusted: Bool) async throws {
        try await setDeviceProperty("Trusted", trusted)
    }

    func setBlocked(_ blocked: Bool) async throws {
        try await setDeviceProperty("Blocked", blocked)
    }

    private func setDeviceProperty(_ name: String, _ value: Bool) async throws {
        guard system.tree.interfaces(at: path) != nil else {
            throw BluetoothError(.doesNotExist, message: "\(address) is not known to the adapter")
        }
        try await system.setProperty(path, Self.device, name, .boolean(value))
        // Read it back, so that isTrusted and isBlocked say so on return.
        try? await system.tree.refresh(Self.device, at: path)
    }

    func forget() async throws {
        guard system.tree.interfaces(at: path) != nil, let adapter = path.parent else {
            throw BluetoothError(.doesNotExist, message: "\(address) is not known to the adapter")
        }
        // Stop what ended just before (StopNotify) ahead of the device.
        await system.notifications.drain()
        let changes = system.tree.changes()
        _ = try await system.call(adapter, BlueZAdapterBackend.interface, "RemoveDevice", [.objectPath(path)])
        // BlueZ answers before it announces the removal: return once the object is gone, so that
        // knownPeripherals() no longer lists it.
        _ = try? await withTimeLimit(Self.removalGrace) { [system, path] in
            for await _ in changes where system.tree.interfaces(at: path) == nil { return }
        }
    }

    /// How long ``forget()`` waits for BlueZ to announce the device's removal after `RemoveDevice`.
    static let removalGrace = Duration.seconds(5)

    /// Makes BlueZ know the device by scanning until its object appears, for at most `timeout`.
    ///
    /// BlueZ offers `org.bluez.Adapter1.ConnectDevice` to connect to an address it has not seen,
    /// but only as an experimental method (`bluetoothd -E`) in 5.66 and 5.82 alike
    /// (`GDBUS_EXPERIMENTAL_ASYNC_METHOD` in `src/adapter.c`, "[experimental]" in
    /// `doc/org.bluez.Adapter.rst`), so Able scans, which every configuration allows; the scan
    /// shares the adapter's discovery session with the process's other scans.
    ///
    /// - Throws: ``BluetoothError/Code/timeout`` when the device was not found in time;
    ///   ``BluetoothError/Code/daemonUnavailable`` or ``BluetoothError/Code/adapterRemoved`` at
    ///   once when `bluetoothd` leaves the bus or the adapter goes away meanwhile.
    func discover(timeout: Duration) async throws {
        guard let adapter = path.parent else { return }
        let changes = system.tree.changes()
        let id = try await system.discovery.begin(ScanFilter(), on: adapter, of: system)
        defer { Task { [system] in await system.discovery.end(id, on: adapter, of: system) } }
        // Found, or the adapter went away (its removal, or bluetoothd leaving the bus).
        let found = try await withTimeLimit(timeout) { [system, path, addressType] () -> Bool in
            // The device, of the address type a scan reported when there is one.
            func isHere() -> Bool {
                guard let properties = system.tree.properties(of: Self.device, at: path) else { return false }
                guard let addressType else { return true }
                return (try? properties.decode("AddressType", as: String.self)) ?? "public" == addressType.rawValue
            }
            if isHere() { return true }
            for await _ in changes {
                if isHere() { return true }
                if system.tree.interfaces(at: adapter) == nil { return false }
            }
            return false
        }
        if found == true { return }
        try Task.checkCancellation()
        if let absence = system.tree.adapterAbsence(
            adapter, "adapter \(adapter.lastElement) went away while looking for \(address)")
        {
            throw absence
        }
        throw BluetoothError(
            .timeout, message: "no device \(address) was found within \(timeout) (it must advertise to be found)")
    }
}
