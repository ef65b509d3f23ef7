import Able
import AbleDBus

extension BlueZAdapterBackend {
    func startAdvertising(_ advertisement: Advertisement) async throws -> AdvertisingSet {
        try advertisement.validateLegacyLength()
        let connection = system.connection
        let path = DBusObjectPath.unique("/able/advertisement_")
        let bluez = try await connection.nameOwner(of: BlueZSystem.service)
        let released = ReleaseFlag()
        try await connection.export(
            [Self.advertisementInterface(advertisement, released: released)], at: path, authorize: { $0 == bluez })
        do {
            _ = try await system.call(
                self.path, "org.bluez.LEAdvertisingManager1", "RegisterAdvertisement",
                [.objectPath(path), .dictionary(key: .string, value: .variant, [])])
        } catch {
            // BlueZ may have registered the advertisement although its answer did not reach us (the
            // task was cancelled while waiting): unregister it, from a task that is not cancelled.
            await system.callEvenIfCancelled(
                self.path, "org.bluez.LEAdvertisingManager1", "UnregisterAdvertisement", [.objectPath(path)])
            await connection.unexport(path)
            throw (error as? BluetoothError).map(Self.explain) ?? error
        }
        let system = self.system
        let adapter = self.path
        return AdvertisingSet(released: released) {
            if !released.value {
                _ = try? await system.call(
                    adapter, "org.bluez.LEAdvertisingManager1", "UnregisterAdvertisement", [.objectPath(path)])
            }
            await connection.unexport(path)
        }
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

    static func advertisementInterface(_ advertisement: Advertisement, released: ReleaseFlag) -> DBusInterface {
        var properties: [DBusProperty] = [
            .constant("Type", advertisement.isConnectable ? "peripheral" : "broadcast"),
            .constant("Discoverable", advertisement.isDiscoverable),
        ]
        if !advertisement.serviceUUIDs.isEmpty {
            properties.append(.constant("ServiceUUIDs", advertisement.serviceUUIDs.map(\.uuidString)))
        }
        if let name = advertisement.localName { properties.append(.constant("LocalName", name)) }
        if let appearance = advertisement.appearance { properties.append(.constant("Appearance", appearance)) }
        if advertisement.includesTxPower { properties.append(.constant("Includes", ["tx-power"])) }
        if !advertisement.manufacturerData.isEmpty {
            let data = advertisement.manufacturerData.mapValues { DBusVariant($0) }
            properties.append(.constant("ManufacturerData", data))
        }
        if !advertisement.serviceData.isEmpty {
            let data = Dictionary(
                uniqueKeysWithValues: advertisement.serviceData.map { ($0.key.uuidString, DBusVariant($0.value)) })
            properties.append(.constant("ServiceData", data))
        }
        if let timeout = advertisement.timeout {
            properties.append(.constant("Timeout", UInt16(clamping: timeout.components.seconds)))
        }
        if let duration = advertisement.duration {
            properties.append(.constant("Duration", UInt16(clamping: duration.components.seconds)))
        }
        return DBusInterface(
            "org.bluez.LEAdvertisement1",
            methods: [
                .immediate("Release") { _ in
                    released.set()
                    return []
                }
            ], properties: properties)
    }
}
