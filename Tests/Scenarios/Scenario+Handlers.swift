import AbleCore
import Testing

/// A server handler's error that is not an ``ATTError``.
private struct NotAnATTError: Error {}

extension Scenario {
    /// A server's handlers in both forms, side by side: those that answer at once (no `await` in
    /// the body) and those that may suspend. Both see the same requests (the central, the stored
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
            OnRead([immediate.uuid]) { request in
                centrals.append("immediate read from \(request.central?.address.description ?? "nobody")")
                return Array(request.storedValue.reversed().dropFirst(request.offset))
            }
            OnRead([suspending.uuid]) { request in
                await Task.yield()
                centrals.append("suspending read from \(request.central?.address.description ?? "nobody")")
                return Array(request.storedValue.reversed().dropFirst(request.offset))
            }
            OnWrite([immediate.uuid]) { request in
                guard request.value != [0xFF] else { throw ATTError.application(0x81)! }
                return .store
            }
            OnWrite([suspending.uuid]) { request in
                await Task.yield()
                guard request.value != [0xFF] else { throw ATTError.application(0x82)! }
                return .store
            }
            OnReadDescriptor(immediateDescriptor.uuid) { _ in [0xD1] }
            OnReadDescriptor(suspendingDescriptor.uuid) { _ in
                await Task.yield()
                return [0xD2]
            }
            OnWriteDescriptor(immediateDescriptor.uuid) { request in
                keptByDescriptors.append("immediate \(request.value)")
                return .accept
            }
            OnWriteDescriptor(suspendingDescriptor.uuid) { request in
                await Task.yield()
                keptByDescriptors.append("suspending \(request.value)")
                return .accept
            }
            OnAnyRead { _ in throw NotAnATTError() }
            OnAnyWrite { request in
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
                #expect(await server.value(of: characteristic.uuid) == [1, 2], "\(name): a refused write stored")
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
            #expect(await server.value(of: caughtByTheCatchAlls.uuid) == [7])
        }
    }
}
