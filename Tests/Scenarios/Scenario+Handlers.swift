import AbleCore
import Testing

/// A server handler's error that is not an ``ATTError``.
private struct NotAnATTError: Error {}

extension Scenario {
    /// A server's handlers in both kinds, side by side: those declared `answering: .immediately`,
    /// which answer at once, and those that run in a task and may suspend. Both see the same requests (the central, the stored
    /// value), store or keep what is written alike, and refuse alike, for characteristics,
    /// descriptors and the catch-alls.
    static func immediateAndSuspendingHandlersAnswerAlike(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let immediate = CharacteristicID(.random(), service: service)
        let suspending = CharacteristicID(.random(), service: service)
        let caughtByTheCatchAlls = CharacteristicID(.random(), service: service)
        let immediateDescriptor = DescriptorID(.random(), characteristic: immediate)
        let suspendingDescriptor = DescriptorID(.random(), characteristic: suspending)
        let start = (0..<40).map { UInt8($0) }
        let centrals = Recorder<String>()
        let keptByDescriptors = Recorder<String>()
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(immediate.uuid, properties: [.read, .write], value: start) {
                    Descriptor(immediateDescriptor.uuid, permissions: [.readable, .writable])
                }
                Characteristic(suspending.uuid, properties: [.read, .write], value: start) {
                    Descriptor(suspendingDescriptor.uuid, permissions: [.readable, .writable])
                }
                Characteristic(caughtByTheCatchAlls.uuid, properties: [.read, .write], value: [9])
            }
            // The read handlers answer the stored value reversed, so that the central sees they ran.
            OnRead(immediate, answering: .immediately) { request in
                centrals.append("immediate read from \(request.central?.address.description ?? "nobody")")
                return Array(request.storedValue.reversed().dropFirst(request.offset))
            }
            OnRead(suspending) { request in
                await Task.yield()
                centrals.append("suspending read from \(request.central?.address.description ?? "nobody")")
                return Array(request.storedValue.reversed().dropFirst(request.offset))
            }
            OnWrite(immediate, answering: .immediately) { request in
                guard request.value != [0xFF] else { throw ATTError.application(0x81)! }
                return .store
            }
            OnWrite(suspending) { request in
                await Task.yield()
                guard request.value != [0xFF] else { throw ATTError.application(0x82)! }
                return .store
            }
            OnRead(immediateDescriptor, answering: .immediately) { _ in [0xD1] }
            OnRead(suspendingDescriptor) { _ in
                await Task.yield()
                return [0xD2]
            }
            OnWrite(immediateDescriptor, answering: .immediately) { request in
                keptByDescriptors.append("immediate \(request.value)")
                return .accept
            }
            OnWrite(suspendingDescriptor) { request in
                await Task.yield()
                keptByDescriptors.append("suspending \(request.value)")
                return .accept
            }
            OnRead(.anyCharacteristic, answering: .immediately) { _ in throw NotAnATTError() }
            OnWrite(.anyCharacteristic) { request in
                guard request.value.count == 1 else { throw ATTError.application(0x83)! }
                return .store
            }
        }
        let centralAddress = try #require(await backend.central.state.address)
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            for (characteristic, refusal) in [(immediate, 0x81), (suspending, 0x82)] {
                let name = characteristic.uuid == immediate.uuid ? "immediate" : "suspending"
                #expect(try await peripheral.read(characteristic) == start.reversed(), "\(name)")
                try await peripheral.write([1, 2], to: characteristic)
                #expect(try await peripheral.read(characteristic) == [2, 1], "\(name)")
                let refused = await #expect(throws: BluetoothError.self, "\(name)") {
                    try await peripheral.write([0xFF], to: characteristic)
                }
                #expect(refused?.attError == ATTError.application(UInt8(refusal)), "\(name)")
                #expect(await server.value(of: characteristic) == [1, 2], "\(name): a refused write stored")
            }
            #expect(
                centrals.all == [
                    "immediate read from \(centralAddress)", "immediate read from \(centralAddress)",
                    "suspending read from \(centralAddress)", "suspending read from \(centralAddress)",
                ])

            #expect(try await peripheral.read(immediateDescriptor) == [0xD1])
            #expect(try await peripheral.read(suspendingDescriptor) == [0xD2])
            try await peripheral.write([5], to: immediateDescriptor)
            try await peripheral.write([6], to: suspendingDescriptor)
            #expect(keptByDescriptors.all == ["immediate [5]", "suspending [6]"])

            let unlikely = await #expect(throws: BluetoothError.self) {
                try await peripheral.read(caughtByTheCatchAlls)
            }
            #expect(unlikely?.attError == .unlikelyError, "\(String(describing: unlikely))")
            try await peripheral.write([7], to: caughtByTheCatchAlls)
            let refused = await #expect(throws: BluetoothError.self) {
                try await peripheral.write([7, 7], to: caughtByTheCatchAlls)
            }
            #expect(refused?.attError == ATTError.application(0x83))
            #expect(await server.value(of: caughtByTheCatchAlls) == [7])
        }
    }
}

extension Scenario {
    /// Which handler answers is chosen by what it names, not by the order of declaration: a handler
    /// that names a characteristic or a descriptor answers it; `.anyCharacteristic` and
    /// `.anyDescriptor` answer the rest, each only for its kind of attribute; a descriptor named
    /// through its identifier is that characteristic's only, not another's of the same UUID; an
    /// attribute no handler covers serves and stores its value.
    static func handlersAreChosenByWhatTheyName(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let named = CharacteristicID(.random(), service: service)
        let other = CharacteristicID(.random(), service: service)
        let descriptorUUID = BluetoothUUID.random()
        let namedDescriptor = DescriptorID(descriptorUUID, characteristic: named)
        let otherDescriptor = DescriptorID(descriptorUUID, characteristic: other)
        let writes = Recorder<String>()
        let definition = GATTServerDefinition {
            Service(service) {
                for characteristic in [named, other] {
                    Characteristic(characteristic.uuid, properties: [.read, .write], value: [0x0C]) {
                        Descriptor(descriptorUUID, permissions: [.readable, .writable], value: [0x0D])
                    }
                }
            }
            // The catch-alls come first: the handlers that name an attribute still win.
            OnRead(.anyCharacteristic) { request in
                await Task.yield()
                return [0xA0] + request.storedValue
            }
            OnWrite(.anyCharacteristic, answering: .immediately) { request in
                writes.append("any characteristic \(request.value)")
                return .store
            }
            OnRead(.anyDescriptor, answering: .immediately) { request in [0xDA] + request.storedValue }
            OnRead(named, answering: .immediately) { _ in [0x01] }
            OnWrite(named) { request in
                await Task.yield()
                writes.append("named \(request.value)")
                return .accept
            }
            OnRead(namedDescriptor) { _ in [0xD1] }
            OnWrite(namedDescriptor, answering: .immediately) { request in
                writes.append("named descriptor \(request.value)")
                return .accept
            }
        }
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            #expect(try await peripheral.read(named) == [0x01])
            #expect(try await peripheral.read(other) == [0xA0, 0x0C])
            #expect(try await peripheral.read(namedDescriptor) == [0xD1])
            #expect(try await peripheral.read(otherDescriptor) == [0xDA, 0x0D])

            try await peripheral.write([1], to: named)
            try await peripheral.write([2], to: other)
            try await peripheral.write([3], to: namedDescriptor)
            // No handler writes other's descriptor: the server stores what is written.
            try await peripheral.write([4], to: otherDescriptor)
            #expect(writes.all == ["named [1]", "any characteristic [2]", "named descriptor [3]"])
            #expect(await server.value(of: named) == [0x0C], "the named handler keeps the value")
            #expect(await server.value(of: other) == [2])
            #expect(try await peripheral.read(other) == [0xA0, 2])
            #expect(try await peripheral.read(otherDescriptor) == [0xDA, 4])
            #expect(try await peripheral.read(namedDescriptor) == [0xD1])
        }
    }
}
