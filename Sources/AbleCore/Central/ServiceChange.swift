/// A change of a connected peripheral's GATT database: services (or characteristics within
/// them) that went and came, as after a firmware update, the peripheral re-registering its GATT
/// application, or BlueZ handling a Service Changed indication.
///
/// A service whose characteristics or descriptors changed appears in both ``removed`` (as it was)
/// and ``added`` (as it is now).
public struct ServiceChange: Sendable, Hashable, CustomStringConvertible {
    /// Every service the peripheral serves after the change, as ``Peripheral/services()`` gives them.
    public var services: [RemoteService]
    /// The services, as they were, that are gone or changed.
    public var removed: [RemoteService]
    /// The services, as they are now, that are new or changed.
    public var added: [RemoteService]

    /// A change from `old` to `new`; `nil` when they are the same.
    package init?(from old: [RemoteService], to new: [RemoteService]) {
        let removed = old.filter { !new.contains($0) }
        let added = new.filter { !old.contains($0) }
        guard !removed.isEmpty || !added.isEmpty else { return nil }
        self.services = new
        self.removed = removed
        self.added = added
    }

    /// The characteristics that were in the database before the change and are not after it,
    /// matched by service and characteristic UUID (one that moved to other handles is still there).
    public var removedCharacteristics: [RemoteCharacteristic] {
        let remaining = Set(services.flatMap { $0.characteristics.map(\.key) })
        return removed.flatMap(\.characteristics).filter { !remaining.contains($0.key) }
    }

    /// Whether the peripheral serves `identifier` after the change.
    public func contains(_ identifier: some CharacteristicIdentifier) -> Bool {
        let key = CharacteristicKey(identifier)
        return services.contains { service in
            service.uuid == key.service && service.characteristics.contains { $0.uuid == key.characteristic }
        }
    }

    public var description: String {
        "services changed: \(removed.count) removed or changed, \(added.count) added or changed, "
            + "\(services.count) served"
    }
}

/// A characteristic by its service's UUID and its own: what stays the same when a database is
/// rebuilt, and what an identifier names. A key that allocates nothing.
struct CharacteristicKey: Hashable {
    let service: BluetoothUUID
    let characteristic: BluetoothUUID

    /// The key of what `identifier` names; each of its UUIDs is read once (an identifier spelled
    /// as text parses it on every access).
    init(_ identifier: some CharacteristicIdentifier) {
        service = identifier.service.uuid
        characteristic = identifier.uuid
    }

    init(service: BluetoothUUID, characteristic: BluetoothUUID) {
        self.service = service
        self.characteristic = characteristic
    }
}

extension RemoteCharacteristic {
    /// The service and characteristic UUIDs: what stays the same when a database is rebuilt.
    var key: CharacteristicKey { CharacteristicKey(service: serviceUUID, characteristic: uuid) }

    /// The error for an operation on this characteristic after it left the database.
    package func removedError(of address: BluetoothAddress, cause: (any Error)? = nil) -> BluetoothError {
        BluetoothError(
            .attributeRemoved,
            message:
                "characteristic \(uuid) of service \(serviceUUID) is gone: \(address) changed its services",
            cause: cause)
    }
}

extension RemoteDescriptor {
    /// The error for an operation on this descriptor after it left the database.
    package func removedError(of address: BluetoothAddress) -> BluetoothError {
        BluetoothError(
            .attributeRemoved,
            message:
                "descriptor \(uuid) of characteristic \(characteristicUUID) is gone: \(address) changed its services")
    }
}
