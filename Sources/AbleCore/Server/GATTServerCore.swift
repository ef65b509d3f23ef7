import AbleIO

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
    /// The ATT MTU of each central's link, as its latest request that said so said: what a
    /// backend that does not publish a link's MTU (BlueZ) learns of it.
    private let reportedMTUs = Lock<[Central: Int]>([:])

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

    /// The characteristic `uuid` of the service `service`, if the definition declares it.
    package func characteristic(_ uuid: BluetoothUUID, service: BluetoothUUID) -> AttributeID? {
        // A definition declares a service once, and a characteristic once within its service.
        guard let serviceIndex = definition.services.firstIndex(where: { $0.uuid == service }),
            let index = definition.services[serviceIndex].characteristics.firstIndex(where: { $0.uuid == uuid })
        else { return nil }
        return AttributeID(service: serviceIndex, characteristic: index)
    }

    /// The descriptor `uuid` of the characteristic `characteristic`, if the definition declares it.
    package func descriptor(_ uuid: BluetoothUUID, of characteristic: AttributeID) -> AttributeID? {
        guard let index = self.characteristic(characteristic).descriptors.firstIndex(where: { $0.uuid == uuid })
        else { return nil }
        return AttributeID(
            service: characteristic.service, characteristic: characteristic.characteristic, descriptor: index)
    }

    package func storedValue(_ id: AttributeID) -> [UInt8] { values.withLock { $0[id] ?? [] } }

    package func store(_ value: [UInt8], for id: AttributeID) { values.withLock { $0[id] = value } }

    /// Notes the ATT MTU a request of `central` came with (BlueZ's `mtu` option).
    package func noteMTU(_ mtu: Int?, of central: Central?) {
        guard let mtu, let central else { return }
        reportedMTUs.withLock { mtus in
            if mtus[central] != mtu { mtus[central] = mtu }
        }
    }

    /// The ATT MTU `central`'s latest request came with, since ``forgetMTU(of:)``.
    package func reportedMTU(of central: Central) -> Int? { reportedMTUs.withLock { $0[central] } }

    /// Forgets what `central`'s requests said of its MTU: its link ended.
    package func forgetMTU(of central: Central) { reportedMTUs.withLock { $0[central] = nil } }

    /// Answers every request of `central` whose handler is still running with
    /// ``ATTError/unlikelyError``, and cancels those handlers: what they return later is dropped.
    /// The server calls it before it asks the backend to disconnect the central, so that no answer
    /// reaches `bluetoothd` after the link is gone (see ``RunningRequests``).
    package func abandonRequests(of central: Central) {
        running.abandon(central)
    }

    /// Whether every read of `id` is answered without suspending, by the stored value or by an
    /// immediate handler, so that ``readImmediately(_:central:offset:mtu:)`` may answer it.
    package func answersReadsImmediately(_ id: AttributeID) -> Bool {
        guard case .async = readHandler(id)?.body else { return true }
        return false
    }

    /// Whether every write of `id` is answered without suspending, by storing it or by an
    /// immediate handler, so that ``writeImmediately(_:value:offset:kind:central:mtu:prepared:)``
    /// may answer it.
    package func answersWritesImmediately(_ id: AttributeID) -> Bool {
        guard case .async = writeHandler(id)?.body else { return true }
        return false
    }

    /// Answers a read: the handler's value, or the stored one from `offset`. `abandonment` is how
    /// the backend answers the request early (see ``RunningRequests``).
    ///
    /// - Throws: Only ``ATTError``: a handler's other errors become ``ATTError/unlikelyError``.
    package func read(
        _ id: AttributeID, central: Central?, offset: Int, mtu: Int?, abandonment: RequestAbandonment? = nil
    ) async throws -> [UInt8] {
        let start = try startRead(id, central, offset, mtu)
        guard case .handler(.async(let handler), let request) = start else { return try Self.answer(start) }
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
        } catch {
            throw Self.attError(error)
        }
        return try Self.checkedLength(value)
    }

    /// Answers a read of an attribute that ``answersReadsImmediately(_:)``, as
    /// ``read(_:central:offset:mtu:abandonment:)`` does but without suspending. Nothing can abandon
    /// the request: it is answered before anything could.
    ///
    /// - Throws: Only ``ATTError``.
    package func readImmediately(_ id: AttributeID, central: Central?, offset: Int, mtu: Int?) throws -> [UInt8] {
        try Self.answer(startRead(id, central, offset, mtu))
    }

    /// Answers a read that needs no suspension: with the stored value, or an immediate handler's.
    private static func answer(_ start: ReadStart) throws -> [UInt8] {
        switch start {
        case .stored(let value):
            return value
        case .handler(.immediate(let handler), let request):
            let value: [UInt8]
            do {
                value = try handler(request)
            } catch {
                throw attError(error)
            }
            return try checkedLength(value)
        case .handler(.async, _):
            preconditionFailure("a read that may suspend answered without suspending")
        }
    }

    /// What answers a read that passed its checks.
    private enum ReadStart {
        /// The stored value from the offset: the attribute has no handler.
        case stored([UInt8])
        case handler(StoredReadHandler.Body, ReadRequest)
    }

    /// Checks a read and finds what answers it.
    private func startRead(_ id: AttributeID, _ central: Central?, _ offset: Int, _ mtu: Int?) throws -> ReadStart {
        noteMTU(mtu, of: central)
        let characteristic = characteristic(id)
        let descriptor = id.descriptor.map { characteristic.descriptors[$0] }
        guard descriptor?.isReadable ?? characteristic.isReadable else { throw ATTError.readNotPermitted }
        let stored = storedValue(id)
        guard let handler = readHandler(characteristic, descriptor)?.body else {
            guard offset <= stored.count else { throw ATTError.invalidOffset }
            return .stored(Array(stored[offset...]))
        }
        let request = ReadRequest(
            uuid: descriptor?.uuid ?? characteristic.uuid,
            characteristicUUID: descriptor == nil ? nil : characteristic.uuid,
            central: central, offset: offset, mtu: mtu, storedValue: stored)
        return .handler(handler, request)
    }

    /// What a handler's error answers: itself if it is an ``ATTError``, else Unlikely Error.
    private static func attError(_ error: any Error) -> ATTError {
        error as? ATTError ?? .unlikelyError
    }

    private static func checkedLength(_ value: [UInt8]) throws -> [UInt8] {
        guard value.count <= maximumValueLength else { throw ATTError.invalidAttributeValueLength }
        return value
    }

    /// Answers a write: checks it, runs the handler, and stores the result unless the handler
    /// keeps the value itself. `abandonment` is how the backend answers the request early (see
    /// ``RunningRequests``).
    package func write(
        _ id: AttributeID, value: [UInt8], offset: Int, kind: WriteRequest.Kind, central: Central?, mtu: Int?,
        prepared: Bool = false, abandonment: RequestAbandonment? = nil
    ) async throws {
        let (handler, request) = try startWrite(
            id, value: value, offset: offset, kind: kind, central: central, mtu: mtu, prepared: prepared)
        guard case .async(let handler) = handler else { return try finish(request, of: id, with: handler) }
        let response: WriteResponse
        do {
            // As in read(_:central:offset:mtu:abandonment:).
            if let central {
                response = try await running.run(for: central, abandonment: abandonment) { try await handler(request) }
            } else {
                response = try await handler(request)
            }
        } catch {
            throw Self.attError(error)
        }
        store(request, of: id, if: response)
    }

    /// Answers a write of an attribute that ``answersWritesImmediately(_:)``, as
    /// ``write(_:value:offset:kind:central:mtu:prepared:abandonment:)`` does but without
    /// suspending.
    ///
    /// - Throws: Only ``ATTError``.
    package func writeImmediately(
        _ id: AttributeID, value: [UInt8], offset: Int, kind: WriteRequest.Kind, central: Central?, mtu: Int?,
        prepared: Bool = false
    ) throws {
        let (handler, request) = try startWrite(
            id, value: value, offset: offset, kind: kind, central: central, mtu: mtu, prepared: prepared)
        try finish(request, of: id, with: handler)
    }

    /// Checks a write and finds its handler, if it has one.
    private func startWrite(
        _ id: AttributeID, value: [UInt8], offset: Int, kind: WriteRequest.Kind, central: Central?, mtu: Int?,
        prepared: Bool
    ) throws -> (StoredWriteHandler.Body?, WriteRequest) {
        noteMTU(mtu, of: central)
        let characteristic = characteristic(id)
        let descriptor = id.descriptor.map { characteristic.descriptors[$0] }
        guard descriptor?.isWritable ?? characteristic.isWritable else { throw ATTError.writeNotPermitted }
        guard offset + value.count <= Self.maximumValueLength else { throw ATTError.invalidAttributeValueLength }
        let stored = storedValue(id)
        // A prepared piece is checked against the value when the write is executed.
        guard prepared || offset <= stored.count else { throw ATTError.invalidOffset }
        let request = WriteRequest(
            uuid: descriptor?.uuid ?? characteristic.uuid,
            characteristicUUID: descriptor == nil ? nil : characteristic.uuid, value: value, offset: offset,
            kind: kind, central: central, mtu: mtu, storedValue: stored, isPrepared: prepared)
        return (writeHandler(characteristic, descriptor)?.body, request)
    }

    /// Ends a write that needs no suspension: runs the immediate handler, if any, and stores.
    private func finish(_ request: WriteRequest, of id: AttributeID, with handler: StoredWriteHandler.Body?) throws {
        var response = WriteResponse.store
        switch handler {
        case nil:
            break
        case .immediate(let handler):
            do {
                response = try handler(request)
            } catch {
                throw Self.attError(error)
            }
        case .async:
            preconditionFailure("a write that may suspend answered without suspending")
        }
        store(request, of: id, if: response)
    }

    /// Stores what a write wrote, unless its handler keeps the value or the write is only prepared.
    private func store(_ request: WriteRequest, of id: AttributeID, if response: WriteResponse) {
        guard response == .store, !request.isPrepared else { return }
        values.withLock { values in
            let current = values[id] ?? []
            values[id] = Array(current.prefix(request.offset)) + request.value
        }
    }

    private func readHandler(_ id: AttributeID) -> StoredReadHandler? {
        let characteristic = characteristic(id)
        return readHandler(characteristic, id.descriptor.map { characteristic.descriptors[$0] })
    }

    /// The read handler of an attribute; the precedence rules are ``OnRead``'s.
    private func readHandler(_ characteristic: Characteristic, _ descriptor: Descriptor?) -> StoredReadHandler? {
        definition.reads.handler(for: characteristic.uuid, descriptor: descriptor?.uuid)
    }

    private func writeHandler(_ id: AttributeID) -> StoredWriteHandler? {
        let characteristic = characteristic(id)
        return writeHandler(characteristic, id.descriptor.map { characteristic.descriptors[$0] })
    }

    /// The write handler of an attribute; the precedence rules are ``OnRead``'s.
    private func writeHandler(_ characteristic: Characteristic, _ descriptor: Descriptor?) -> StoredWriteHandler? {
        definition.writes.handler(for: characteristic.uuid, descriptor: descriptor?.uuid)
    }
}
