import AbleCore
import AbleDBus
import AbleIO

/// An adapter as BlueZ exports it: an `org.bluez.Adapter1` object such as `/org/bluez/hci0`.
struct BlueZAdapterBackend: AdapterBackend {
    static let interface = "org.bluez.Adapter1"

    let system: BlueZSystem
    let name: String
    let path: DBusObjectPath

    /// Finds the adapter named `name`, or the first adapter when `name` is `nil`.
    static func open(name: String?, system: BlueZSystem) async throws -> BlueZAdapterBackend {
        let adapters = system.tree.objects.filter { $0.value[interface] != nil }.keys.sorted()
        let path: DBusObjectPath
        if let name {
            guard let found = adapters.first(where: { $0.lastElement == name }) else {
                throw BluetoothError(
                    .doesNotExist,
                    message:
                        "no adapter named \(name) (BlueZ has \(adapters.map(\.lastElement).joined(separator: ", ")))")
            }
            path = found
        } else {
            guard let first = adapters.first else {
                throw BluetoothError(.notAvailable, message: "BlueZ has no Bluetooth adapter")
            }
            path = first
        }
        return BlueZAdapterBackend(system: system, name: path.lastElement, path: path)
    }

    var currentState: Adapter.State {
        Self.state(name: name, from: system.tree.properties(of: Self.interface, at: path))
    }

    static func state(name: String, from properties: [String: DBusVariant]?) -> Adapter.State {
        guard let properties else { return .absent(name) }
        func value<T: DBusRepresentable>(_ key: String, _ fallback: T) -> T {
            (try? properties.decode(key, as: T.self)) ?? fallback
        }
        return Adapter.State(
            name: name, address: BluetoothAddress(value("Address", "")), systemName: value("Name", ""),
            alias: value("Alias", ""), isPowered: value("Powered", false), isDiscoverable: value("Discoverable", false),
            isPairable: value("Pairable", false), isDiscovering: value("Discovering", false), isPresent: true)
    }

    func set(_ change: AdapterChange) async throws {
        let (property, value): (String, DBusValue) =
            switch change {
            case .powered(let on): ("Powered", .boolean(on))
            case .discoverable(let on): ("Discoverable", .boolean(on))
            case .pairable(let on): ("Pairable", .boolean(on))
            case .alias(let alias): ("Alias", .string(alias))
            }
        if let absence = system.tree.adapterAbsence(path, "adapter \(name) is not present") { throw absence }
        try await system.setProperty(path, Self.interface, property, value)
    }

    func stateChanges() -> AsyncStream<Adapter.State> {
        system.tree.states(of: path, bufferingPolicy: .bufferingNewest(1)) { [system, name, path] in
            Self.state(name: name, from: system.tree.properties(of: Self.interface, at: path))
        }
    }
}

extension BlueZAdapterBackend {
    func scan(_ filter: ScanFilter, into continuation: ScanStream.Continuation) async throws {
        // Listen before discovery starts, so the first reports are not missed.
        let changes = system.tree.changes()
        let id = try await system.discovery.begin(filter, on: path, of: system)
        let task = Task { [system, path] in
            var seen = Set<BluetoothAddress>()
            // Set once the adapter's object is gone; see below.
            var verdict: Task<Void, Never>?
            defer { verdict?.cancel() }
            for await change in changes {
                // A report's values are those of its announcement, not the tree's latest.
                let device: DBusObjectPath
                var reported: [String: DBusVariant] = [:]
                switch change {
                case .interfacesAdded(let changed, let interfaces) where interfaces["org.bluez.Device1"] != nil:
                    device = changed
                    reported = interfaces["org.bluez.Device1"]!
                case .propertiesChanged(let changed, "org.bluez.Device1", let properties, _)
                where properties.keys.contains(where: Self.reportProperties.contains):
                    device = changed
                    reported = properties
                case .serviceLeft:
                    let error = BluetoothError(.daemonUnavailable, message: "bluetoothd left the bus during the scan")
                    continuation.finish(throwing: error)
                    return
                case .interfacesRemoved(path, let interfaces) where interfaces.contains(Self.interface):
                    // A stopping bluetoothd removes its adapters before it leaves the bus: the
                    // adapter alone went away only if bluetoothd stays a moment longer.
                    guard verdict == nil else { continue }
                    verdict = Task {
                        guard (try? await Task.sleep(for: Self.daemonExitGrace)) != nil else { return }
                        continuation.finish(
                            throwing: BluetoothError(.adapterRemoved, message: "adapter \(path.lastElement) went away"))
                    }
                    continue
                default:
                    continue
                }
                guard device.parent == path,
                    let known = system.tree.properties(of: "org.bluez.Device1", at: device),
                    let discovery = Discovery(bluezDevice: known.merging(reported) { $1 }), filter.matches(discovery)
                else { continue }
                var report = discovery
                report.isNew = seen.insert(discovery.address).inserted
                guard report.isNew || filter.allowsDuplicates else { continue }
                continuation.yield(report)
            }
            continuation.finish()
        }
        continuation.onTermination { [system, path] in
            task.cancel()
            Task { await system.discovery.end(id, on: path, of: system) }
        }
    }

    func peripheral(address: BluetoothAddress, addressType: BluetoothAddress.AddressType?) -> any PeripheralBackend {
        BlueZPeripheralBackend(system: system, adapter: path, address: address, addressType: addressType)
    }

    func gattServerBackend() async throws -> any GATTServerBackend {
        BlueZGATTApplication(system: system, adapter: path)
    }

    /// How long a scan whose adapter went away waits for bluetoothd to leave the bus, to say
    /// ``BluetoothError/Code/daemonUnavailable`` rather than ``BluetoothError/Code/adapterRemoved``.
    static let daemonExitGrace = Duration.seconds(2)

    /// Device properties whose change means a new advertising report arrived.
    static let reportProperties: Set<String> = [
        "RSSI", "ManufacturerData", "ServiceData", "TxPower", "AdvertisingData", "AdvertisingFlags",
    ]
}

extension BlueZAdapterBackend {
    func listenL2CAP(psm: PSM, _ options: L2CAPOptions) async throws -> L2CAPListener {
        guard let address = currentState.address else {
            throw BluetoothError(.notReady, message: "\(name) is gone: BlueZ no longer lists it")
        }
        return try KernelL2CAP.listen(
            psm: psm, adapterAddress: address, security: options.security, receiveMTU: options.receiveMTU,
            watermarks: options.watermarks)
    }
}
