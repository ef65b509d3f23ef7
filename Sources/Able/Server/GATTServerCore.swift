import AbleStreams

/// Where an attribute sits in a definition: service, characteristic, and descriptor (if any).
package struct AttributeID: Hashable, Sendable {
    package var service: Int
    package var characteristic: Int
    package var descriptor: Int?

    package init(service: Int, characteristic: Int, descriptor: Int? = nil) {
        self.service = service
        self.characteristic = characteristic
        self.descriptor = descriptor
    }
}

/// The backend-agnostic heart of a GATT server: stored values, permission and length checks,
/// and which handler answers. Backends turn their requests into calls of ``read(_:central:offset:mtu:)``
/// and ``write(_:value:offset:kind:central:mtu:)``.
package final class GATTServerCore: Sendable {
    static let maximumValueLength = 512

    package let definition: GATTServerDefinition
    private let values: Lock<[AttributeID: [UInt8]]>
    /// The handlers running for a central, which ``abandonRequests(of:)`` answers at once.
    private let running = RunningRequests()

    package init(definition: GATTServerDefinition) {
        self.definition = definition
        var values: [AttributeID: [UInt8]] = [:]
        for (serviceIndex, service) in definition.services.enumerated() {
            for (index, characteristic) in service.characteristics.enumerated() {
                values[AttributeID(service: serviceIndex, characteristic: index)] = characteristic.value
                for (descriptorIndex, descriptor) in characteristic.descriptors.enumerated() {
                    values[AttributeID(service: serviceIndex, characteristic: index, descriptor: descriptorIndex)] =
                        descriptor.value
                }
            }
        }
        self.values = Lock(values)
    }

    package func characteristic(_ id: AttributeID) -> Characteristic {
        definition.services[id.service].characteristics[id.characteristic]
    }

    /// Every characteristic with the UUID, in declaration order.
    package func characteristics(_ uuid: BluetoothUUID) -> [AttributeID] {
        definition.services.enumerated().flatMap { serviceIndex, service in
            service.characteristics.enumerated().compactMap { index, characteristic in
                characteristic.uuid == uuid ? AttributeID(service: serviceIndex, characteristic: index) : nil
            }
        }
    }

    package func storedValue(_ id: AttributeID) -> [UInt8] { values.withLock { $0[id] ?? [] } }

    package func store(_ value: [UInt8], for id: AttributeID) { values.withLock { $0[id] = value } }

    /// Answers every request of `central` whose handler is still running with
    /// ``ATTError/unlikelyError``, and cancels those handlers: what they return later is dropped.
    /// The server calls it before it asks the backend to disconnect the central, so that no answer
    /// reaches `bluetoothd` after the link is gone (see ``RunningRequests``).
    package func abandonRequests(of central: Central) {
        running.abandon(central)
    }

    /// Answers a read: the handler's value, or the stored one from `offset`. `abandonment` is how
    /// the backend answers the request early (see ``RunningRequests``).
    ///
    /// - Throws: Only ``ATTError``: a handler's other errors become ``ATTError/unlikelyError``.
    package func read(
        _ id: AttributeID, central: Central?, offset: Int, mtu: Int?, abandonment: RequestAbandonment? = nil
    ) async throws -> [UInt8] {
        let characteristic = characteristic(id)
        let descriptor = id.descriptor.map { characteristic.descriptors[$0] }
        guard descriptor?.isReadable ?? characteristic.isReadable else { throw ATTError.readNotPermitted }
        let stored = storedValue(id)
        let handler =
            (descriptor.map { definition.descriptorReads[$0.uuid] ?? definition.anyDescriptorRead }
            ?? (definition.characteristicReads[characteristic.uuid] ?? definition.anyCharacteristicRead))?.handle
        guard let handler else {
            guard offset <= stored.count else { throw ATTError.invalidOffset }
            return Array(stored[offset...])
        }
        let request = ReadRequest(
            uuid: descriptor?.uuid ?? characteristic.uuid,
            characteristicUUID: descriptor == nil ? nil : characteristic.uuid,
            central: central, offset: offset, mtu: mtu, storedValue: stored)
        let value: [UInt8]
        do {
            // A request that names its central runs so that abandonRequests(of:) can answer it first
            // (see RunningRequests). One that names none calls the handler directly: passing it
            // to the generic run(for:abandonment:_:) costs two allocations (a closure and the
            // thunk that adapts it), and nothing could abandon it.
            if let central {
                value = try await running.run(for: central, abandonment: abandonment) { try await handler(request) }
            } else {
                value = try await handler(request)
            }
        } catch let error as ATTError {
            throw error
        } catch {
            throw ATTError.unlikelyError
        }
        guard value.count <= Self.maximumValueLength else { throw ATTError.invalidAttributeValueLength }
        return value
    }

    /// Answers a write: checks it, runs the handler, and stores the result unless the handler
    /// keeps the value itself. `abandonment` is how the backend answers the request early (see
    /// ``RunningRequests``).
    package func write(
        _ id: AttributeID, value: [UInt8], offset: Int, kind: WriteRequest.Kind, central: Central?, mtu: Int?,
        prepared: Bool = false, abandonment: RequestAbandonment? = nil
    ) async throws {
        let characteristic = characteristic(id)
        let descriptor = id.descriptor.map { characteristic.descriptors[$0] }
        guard descriptor?.isWritable ?? characteristic.isWritable else { throw ATTError.writeNotPermitted }
        guard offset + value.count <= Self.maximumValueLength else { throw ATTError.invalidAttributeValueLength }
        let stored = storedValue(id)
        // A prepared piece is checked against the value when the write is executed.
        guard prepared || offset <= stored.count else { throw ATTError.invalidOffset }
        let handler =
            (descriptor.map { definition.descriptorWrites[$0.uuid] ?? definition.anyDescriptorWrite }
            ?? (definition.characteristicWrites[characteristic.uuid] ?? definition.anyCharacteristicWrite))?.handle
        var response = WriteResponse.store
        if let handler {
            let request = WriteRequest(
                uuid: descriptor?.uuid ?? characteristic.uuid,
                characteristicUUID: descriptor == nil ? nil : characteristic.uuid, value: value, offset: offset,
                kind: kind, central: central, mtu: mtu, storedValue: stored, isPrepared: prepared)
            do {
                // As in read(_:central:offset:mtu:abandonment:).
                if let central {
                    response = try await running.run(for: central, abandonment: abandonment) {
                        try await handler(request)
                    }
                } else {
                    response = try await handler(request)
                }
            } catch let error as ATTError {
                throw error
            } catch {
                throw ATTError.unlikelyError
            }
        }
        if response == .store, !prepared {
            values.withLock { values in
                let current = values[id] ?? []
                values[id] = Array(current.prefix(offset)) + value
            }
        }
    }
}
