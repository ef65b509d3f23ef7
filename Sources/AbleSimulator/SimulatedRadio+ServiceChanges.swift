import AbleCore
import AbleIO

/// One ``/Able/Peripheral/serviceChanges()`` stream of a simulated central, and the database it
/// saw last (`nil` until the connection first resolved its services).
struct ServiceChangeListener {
    var continuation: AsyncStream<ServiceChange>.Continuation
    var known: [RemoteService]?
}

extension SimulatedRadio {
    /// Replaces the GATT database (and handlers) a device serves, as a firmware update or a server
    /// registering another application does, and tells the connected centrals: each
    /// subscription to a characteristic that is no longer there as it was ends with
    /// ``/Able/BluetoothError/Code/attributeRemoved``, then each central's service-change streams
    /// report the new database. The links stay up.
    func replaceDatabase(
        of peripheral: BluetoothAddress, with core: GATTServerCore?, events: GATTServerEvents?? = .none
    ) {
        let (before, centrals) = state.withLock { state -> ([RemoteService], [BluetoothAddress]) in
            let before = state.devices[peripheral]?.core.map { Self.servicesView(of: $0.definition) } ?? []
            state.devices[peripheral]?.core = core
            if let events { state.devices[peripheral]?.events = events }
            return (before, state.connections.filter { $0.peripheral == peripheral }.map(\.central))
        }
        let after = core.map { Self.servicesView(of: $0.definition) } ?? []
        // As BlueZ clears a changed range: a subscription survives only if its characteristic is
        // still there, unchanged, under the same handle.
        let gone = before.flatMap(\.characteristics).filter { !after.flatMap(\.characteristics).contains($0) }
        let ended = state.withLock { state -> [(NotificationStream.Continuation, RemoteCharacteristic)] in
            var ended: [(NotificationStream.Continuation, RemoteCharacteristic)] = []
            for characteristic in gone {
                guard let id = AttributeID(remote: characteristic.id) else { continue }
                for central in centrals {
                    let key = RadioState.SubscriptionKey(central: central, peripheral: peripheral, attribute: id)
                    for stream in state.subscriptions.removeValue(forKey: key)?.values ?? [:].values {
                        ended.append((stream, characteristic))
                    }
                }
            }
            return ended
        }
        for (stream, characteristic) in ended { stream.finish(throwing: characteristic.removedError(of: peripheral)) }
        for central in centrals {
            refreshServiceListeners(of: RadioState.Connection(central: central, peripheral: peripheral))
        }
    }

    /// Compares what each service-change stream of the connection saw last with what the
    /// peripheral serves now, and reports the difference; called when the database changes and
    /// when a connection resolves its services.
    func refreshServiceListeners(of connection: RadioState.Connection) {
        let changes = state.withLock { state -> [(AsyncStream<ServiceChange>.Continuation, ServiceChange)] in
            guard state.connections.contains(connection), let listeners = state.serviceChangeListeners[connection]
            else { return [] }
            let now = state.devices[connection.peripheral]?.core.map { Self.servicesView(of: $0.definition) } ?? []
            var changes: [(AsyncStream<ServiceChange>.Continuation, ServiceChange)] = []
            for (id, listener) in listeners {
                state.serviceChangeListeners[connection]?[id]?.known = now
                guard let known = listener.known, let change = ServiceChange(from: known, to: now) else { continue }
                changes.append((listener.continuation, change))
            }
            return changes
        }
        for (continuation, change) in changes { continuation.yield(change) }
    }

    /// Adds a service-change stream for a connection.
    func serviceChanges(of connection: RadioState.Connection) -> AsyncStream<ServiceChange> {
        let (stream, continuation) = AsyncStream<ServiceChange>.makeStream(bufferingPolicy: .bufferingNewest(32))
        let id = state.withLock { state in
            let id = state.makeID()
            let known =
                state.connections.contains(connection)
                ? (state.devices[connection.peripheral]?.core.map { Self.servicesView(of: $0.definition) } ?? [])
                : nil
            state.serviceChangeListeners[connection, default: [:]][id] = ServiceChangeListener(
                continuation: continuation, known: known)
            return id
        }
        continuation.onTermination = { [self] _ in
            _ = state.withLock { $0.serviceChangeListeners[connection]?.removeValue(forKey: id) }
        }
        return stream
    }

    /// A served definition as a central discovers it: the indices are the handles.
    static func servicesView(of definition: GATTServerDefinition) -> [RemoteService] {
        definition.services.enumerated().map { serviceIndex, service in
            RemoteService(
                uuid: service.uuid, isPrimary: service.kind == .primary,
                characteristics: service.characteristics.enumerated().map { index, characteristic in
                    let id = AttributeID(service: serviceIndex, characteristic: index)
                    return RemoteCharacteristic(
                        uuid: characteristic.uuid, serviceUUID: service.uuid, properties: characteristic.properties,
                        descriptors: cccd(of: characteristic, id)
                            + characteristic.descriptors.enumerated().map { descriptorIndex, descriptor in
                                RemoteDescriptor(
                                    uuid: descriptor.uuid, characteristicUUID: characteristic.uuid,
                                    id: AttributeID(
                                        service: serviceIndex, characteristic: index, descriptor: descriptorIndex
                                    )
                                    .remote)
                            }, id: id.remote)
                }, id: RemoteAttributeID([UInt16(serviceIndex)]))
        }
    }
}

/// The Client Characteristic Configuration descriptor BlueZ shows for a characteristic that
/// notifies or indicates, ahead of the declared descriptors as in BlueZ's handle order.
private func cccd(of characteristic: Characteristic, _ id: AttributeID) -> [RemoteDescriptor] {
    guard !characteristic.properties.isDisjoint(with: [.notify, .indicate]) else { return [] }
    return [
        RemoteDescriptor(
            uuid: .clientCharacteristicConfiguration, characteristicUUID: characteristic.uuid,
            id: RemoteAttributeID(id.remote.components + [AttributeID.cccdComponent]))
    ]
}
