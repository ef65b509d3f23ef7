import AbleCore
import AbleDBus

/// Shares one BlueZ discovery session per adapter among every scan of this process: the first
/// scan starts it, each change of the set of scans updates the merged filter, and the last
/// scan to end stops it. Operations run one after another, in the order they were asked for.
actor BlueZDiscoveryCoordinator {
    private var scans: [DBusObjectPath: [UInt64: ScanFilter]] = [:]
    private var nextID: UInt64 = 0
    private let queue = FIFOLock()

    /// Adds a scan; returns its identifier once BlueZ is discovering with a filter that covers it.
    func begin(_ filter: ScanFilter, on adapter: DBusObjectPath, of system: BlueZSystem) async throws -> UInt64 {
        nextID += 1
        let id = nextID
        scans[adapter, default: [:]][id] = filter
        let first = scans[adapter]!.count == 1
        let merged = Self.merge(Array(scans[adapter]!.values))
        do {
            try await queue.withLock { [system] in
                do {
                    _ = try await system.call(adapter, "org.bluez.Adapter1", "SetDiscoveryFilter", [merged])
                    if first { _ = try await system.call(adapter, "org.bluez.Adapter1", "StartDiscovery") }
                } catch let error as BluetoothError where !first && error.code == .inProgress {
                    // An earlier scan has BlueZ discovering already, which is what this one needs.
                }
            }
        } catch {
            scans[adapter]?[id] = nil
            if first, scans[adapter]?.isEmpty != false {
                // StartDiscovery may have reached BlueZ although its answer did not reach us (the
                // scan was cancelled while waiting): stop it, in line and whatever the caller does.
                // A refused StartDiscovery makes this a harmless error.
                queue.submit { [system] in _ = try? await system.call(adapter, "org.bluez.Adapter1", "StopDiscovery") }
            }
            throw error
        }
        return id
    }

    /// Removes a scan; stops discovery when it was the last one on its adapter.
    func end(_ id: UInt64, on adapter: DBusObjectPath, of system: BlueZSystem) async {
        guard scans[adapter]?.removeValue(forKey: id) != nil else { return }
        let remaining = Array(scans[adapter]!.values)
        try? await queue.withLock { [system] in
            if remaining.isEmpty {
                _ = try? await system.call(adapter, "org.bluez.Adapter1", "StopDiscovery")
                _ = try? await system.call(
                    adapter, "org.bluez.Adapter1", "SetDiscoveryFilter",
                    [.dictionary(key: .string, value: .variant, [])])
            } else {
                _ = try? await system.call(adapter, "org.bluez.Adapter1", "SetDiscoveryFilter", [Self.merge(remaining)])
            }
        }
    }

    /// The filter BlueZ gets: LE only, and services or RSSI only when every scan asks for them
    /// (BlueZ would otherwise hide from one scan what another needs).
    static func merge(_ filters: [ScanFilter]) -> DBusValue {
        var entries: [String: DBusValue] = ["Transport": .string("le")]
        if !filters.isEmpty, filters.allSatisfy({ !$0.serviceUUIDs.isEmpty }) {
            let uuids = Set(filters.flatMap(\.serviceUUIDs)).map(\.uuidString).sorted()
            entries["UUIDs"] = .array(.string, uuids.map(DBusValue.string))
        }
        if !filters.isEmpty, filters.allSatisfy({ $0.minimumRSSI != nil }) {
            entries["RSSI"] = .int16(Int16(clamping: filters.compactMap(\.minimumRSSI).min()!))
        }
        if filters.contains(where: \.allowsDuplicates) { entries["DuplicateData"] = .boolean(true) }
        return .dictionary(
            key: .string, value: .variant,
            entries.sorted { $0.key < $1.key }.map {
                DBusDictionaryEntry(key: .string($0.key), value: .variant($0.value))
            })
    }
}

extension Discovery {
    /// Reads a discovery from the properties of an `org.bluez.Device1` object.
    init?(bluezDevice properties: [String: DBusVariant]) {
        guard let text = try? properties.decode("Address", as: String.self), let address = BluetoothAddress(text)
        else { return nil }
        let type = (try? properties.decode("AddressType", as: String.self)) ?? "public"
        var advertisement = AdvertisementData(
            localName: try? properties.decode("Name", as: String.self),
            serviceUUIDs: ((try? properties.decode("UUIDs", as: [String].self)) ?? []).compactMap(BluetoothUUID.init),
            txPowerLevel: (try? properties.decode("TxPower", as: Int16.self)).map(Int.init),
            appearance: try? properties.decode("Appearance", as: UInt16.self))
        if let manufacturer = try? properties.decode("ManufacturerData", as: [UInt16: DBusVariant].self) {
            advertisement.manufacturerData = manufacturer.compactMapValues { try? $0.decode([UInt8].self) }
        }
        // AdvertisingData (BlueZ 5.66 with -E, 5.82) holds the types BlueZ has no property for,
        // such as the solicited UUIDs.
        if let data = try? properties.decode("AdvertisingData", as: [UInt8: DBusVariant].self) {
            var bytes: [UInt8] = []
            for (type, value) in data.sorted(by: { $0.key < $1.key }) {
                guard let value = try? value.decode([UInt8].self), value.count < 255 else { continue }
                bytes += [UInt8(value.count + 1), type] + value
            }
            if let parsed = try? AdvertisementData(advertisingBytes: bytes) {
                advertisement.solicitedUUIDs = parsed.solicitedUUIDs
            }
        }
        if let flags = try? properties.decode("AdvertisingFlags", as: [UInt8].self), let first = flags.first {
            advertisement.flags = AdvertisementData.Flags(rawValue: first)
        }
        if let service = try? properties.decode("ServiceData", as: [String: DBusVariant].self) {
            for (uuid, value) in service {
                guard let uuid = BluetoothUUID(uuid), let bytes = try? value.decode([UInt8].self) else { continue }
                advertisement.serviceData[uuid] = bytes
            }
        }
        self.init(
            address: address, addressType: BluetoothAddress.AddressType(rawValue: type),
            // 127 is HCI's "RSSI not available".
            rssi: (try? properties.decode("RSSI", as: Int16.self)).flatMap { $0 }.flatMap { $0 == 127 ? nil : Int($0) },
            advertisement: advertisement)
    }
}
