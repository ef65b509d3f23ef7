import AbleCore
import AbleDBus
import AbleIO

extension BlueZAdapterBackend {
    static let monitorManager = "org.bluez.AdvertisementMonitorManager1"

    /// Registers an `or_patterns` advertisement monitor and delivers the devices BlueZ finds with it.
    ///
    /// A monitor does not outlive `bluetoothd`: like an active scan, the stream ends with
    /// ``BluetoothError/Code/daemonUnavailable`` when the daemon leaves the bus (BlueZ forgets
    /// every monitor) and with ``BluetoothError/Code/adapterRemoved`` when the adapter goes; the
    /// app starts a new passive scan when the adapter is back. A scan is a loop the app runs, so
    /// the end is where it learns of the gap, and a monitor registered again by itself would hide it.
    func passiveScan(_ filter: PassiveScanFilter, into continuation: ScanStream.Continuation) async throws {
        guard let interfaces = system.tree.interfaces(at: path) else {
            throw BluetoothError(
                system.tree.owner == nil ? .daemonUnavailable : .notAvailable, message: "adapter \(name) is not present"
            )
        }
        let types = (try? interfaces[Self.monitorManager]?.decode("SupportedMonitorTypes", as: [String].self)) ?? nil
        guard let types, types.contains("or_patterns") else {
            throw BluetoothError(
                .notSupported,
                message: "BlueZ offers no advertisement monitor (or_patterns) on \(name): BlueZ 5.66 and 5.82 export "
                    + "AdvertisementMonitorManager1 only with their experimental interfaces (bluetoothd -E)")
        }
        let connection = system.connection
        guard let bluez = try await connection.nameOwner(of: BlueZSystem.service) else {
            throw BluetoothError(.daemonUnavailable, message: "bluetoothd is not running")
        }
        let root = DBusObjectPath.unique("/able/monitor_")
        let monitor = root.appending("monitor0")!
        let authorize: @Sendable (String) -> Bool = { $0 == bluez }
        let system = self.system
        let found = Lock(Set<BluetoothAddress>())
        var properties: [DBusProperty] = [
            .constant("Type", "or_patterns"),
            DBusProperty(
                "Patterns", signature: .array(.structure([.byte, .byte, .array(.byte)])),
                get: { [patterns = filter.patterns] in
                    .array(
                        .structure([.byte, .byte, .array(.byte)]),
                        patterns.map {
                            .structure([.byte(UInt8(clamping: $0.offset)), .byte($0.adType), .bytes($0.bytes)])
                        })
                }),
        ]
        if let high = filter.rssiHighThreshold { properties.append(.constant("RSSIHighThreshold", Int16(high))) }
        if let low = filter.rssiLowThreshold { properties.append(.constant("RSSILowThreshold", Int16(low))) }
        let interface = DBusInterface(
            "org.bluez.AdvertisementMonitor1",
            methods: [
                .immediate("Release") { _ in
                    continuation.finish(
                        throwing: BluetoothError(.notAvailable, message: "BlueZ released the advertisement monitor"))
                    return []
                },
                .immediate("Activate") { _ in [] },
                DBusMethod("DeviceFound", in: "o") { call in
                    let device = try call.argument(0, as: DBusObjectPath.self)
                    let reply = try await system.connection.call(
                        destination: BlueZSystem.service, path: device, interface: "org.freedesktop.DBus.Properties",
                        method: "GetAll", arguments: [.string("org.bluez.Device1")])
                    guard let values = try? reply.first?.decode([String: DBusVariant].self),
                        var discovery = Discovery(bluezDevice: values)
                    else { return [] }
                    discovery.isNew = found.withLock { $0.insert(discovery.address).inserted }
                    continuation.yield(discovery)
                    return []
                },
                .immediate("DeviceLost", in: "o") { _ in [] },
            ], properties: properties)
        try await connection.exportObjectManager(at: root, authorize: authorize)
        do {
            try await connection.export([interface], at: monitor, authorize: authorize)
            _ = try await system.call(path, Self.monitorManager, "RegisterMonitor", [.objectPath(root)])
        } catch {
            await system.callEvenIfCancelled(path, Self.monitorManager, "UnregisterMonitor", [.objectPath(root)])
            await connection.unexport(monitor)
            await connection.unexport(root)
            throw error
        }
        // The stack going ends the scan, as it ends an active one (see `scan(_:into:)`).
        let changes = system.tree.changes()
        let watcher = Task { [path] in
            var verdict: Task<Void, Never>?
            defer { verdict?.cancel() }
            for await change in changes {
                switch change {
                case .serviceLeft:
                    continuation.finish(
                        throwing: BluetoothError(.daemonUnavailable, message: "bluetoothd left the bus during the scan")
                    )
                    return
                case .interfacesRemoved(path, let interfaces) where interfaces.contains(Self.interface):
                    guard verdict == nil else { continue }
                    verdict = Task {
                        guard (try? await Task.sleep(for: Self.daemonExitGrace)) != nil else { return }
                        continuation.finish(
                            throwing: BluetoothError(.adapterRemoved, message: "adapter \(path.lastElement) went away"))
                    }
                default:
                    continue
                }
            }
        }
        continuation.onTermination { [system, path] in
            watcher.cancel()
            Task {
                _ = try? await system.call(path, Self.monitorManager, "UnregisterMonitor", [.objectPath(root)])
                await connection.unexport(monitor)
                await connection.unexport(root)
            }
        }
    }
}
