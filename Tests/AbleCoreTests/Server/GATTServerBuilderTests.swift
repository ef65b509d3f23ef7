import Testing

@testable import AbleCore

@Suite struct GATTServerBuilderTests {
    static let service: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
    static let characteristic: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A52553A"
    static let descriptor = BluetoothUUID.characteristicUserDescription

    @Test func everyComponentLandsInTheDefinition() throws {
        let definition = GATTServerDefinition {
            Service(Self.service) {
                Characteristic(Self.characteristic, properties: [.read, .indicate], permissions: .readable) {
                    Descriptor(Self.descriptor, permissions: [.readable, .writable], value: Array("psm".utf8))
                }
            }
            Service(.batteryService, .secondary)
            AutoManageDevices()
            OnRead([Self.characteristic]) { _ in [1] }
            OnWrite([Self.characteristic]) { _ in .store }
            OnReadDescriptor(Self.descriptor) { _ in [2] }
            OnWriteDescriptor(Self.descriptor) { _ in .accept }
            OnAnyRead { _ in [] }
            OnAnyWrite { _ in .store }
            OnAnyReadDescriptor { _ in [] }
            OnAnyWriteDescriptor { _ in .store }
            OnConnectionStateChange { _, _, _ in }
            OnSubscriptionChange { _, _, _, _ in }
            OnStateChange { _, _ in }
        }
        try definition.validate()
        #expect(definition.services.map(\.uuid) == [Self.service, .batteryService])
        #expect(definition.services[1].kind == .secondary)
        #expect(definition.services[0].characteristics[0].descriptors[0].value == Array("psm".utf8))
        #expect(definition.managesDevicesAutomatically)
        #expect(definition.characteristicReads[Self.characteristic] != nil)
        #expect(definition.descriptorWrites[Self.descriptor] != nil)
        #expect(definition.anyCharacteristicRead != nil && definition.anyDescriptorWrite != nil)
        #expect(definition.connectionHandlers.count == 1 && definition.stateHandlers.count == 1)
    }

    /// Swift picks a handler's form by its body: one without `await` is immediate, one with it
    /// (or a function that is `async`) may suspend; the server core answers reads and writes
    /// without suspending only when no handler of the attribute may suspend.
    @Test func aHandlerWithoutAwaitIsImmediate() throws {
        @Sendable func later(_ request: ReadRequest) async -> [UInt8] { [3] }
        let other: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525500"
        let definition = GATTServerDefinition {
            Service(Self.service) {
                Characteristic(Self.characteristic, properties: [.read, .write]) {
                    Descriptor(Self.descriptor, permissions: [.readable, .writable])
                }
                Characteristic(other, properties: [.read, .write])
            }
            OnRead([Self.characteristic]) { _ in [1] }
            OnWrite([Self.characteristic]) { _ in
                await Task.yield()
                return .store
            }
            OnReadDescriptor(Self.descriptor, handler: later)
            OnWriteDescriptor(Self.descriptor) { request in
                guard !request.value.isEmpty else { throw ATTError.valueNotAllowed }
                return .accept
            }
        }
        func isImmediate(_ handler: StoredReadHandler?) -> Bool {
            if case .immediate = handler?.body { true } else { false }
        }
        func isImmediate(_ handler: StoredWriteHandler?) -> Bool {
            if case .immediate = handler?.body { true } else { false }
        }
        #expect(isImmediate(definition.characteristicReads[Self.characteristic]))
        #expect(!isImmediate(definition.characteristicWrites[Self.characteristic]))
        #expect(!isImmediate(definition.descriptorReads[Self.descriptor]))
        #expect(isImmediate(definition.descriptorWrites[Self.descriptor]))

        let core = GATTServerCore(definition: definition)
        let characteristic = AttributeID(service: 0, characteristic: 0)
        let descriptor = AttributeID(service: 0, characteristic: 0, descriptor: 0)
        let unhandled = AttributeID(service: 0, characteristic: 1)
        #expect(core.answersReadsImmediately(characteristic) && !core.answersWritesImmediately(characteristic))
        #expect(!core.answersReadsImmediately(descriptor) && core.answersWritesImmediately(descriptor))
        #expect(core.answersReadsImmediately(unhandled) && core.answersWritesImmediately(unhandled))
        #expect(try core.readImmediately(characteristic, central: nil, offset: 0, mtu: nil) == [1])
        try core.writeImmediately(unhandled, value: [7, 8], offset: 0, kind: .request, central: nil, mtu: nil)
        #expect(try core.readImmediately(unhandled, central: nil, offset: 1, mtu: nil) == [8])
        #expect(throws: ATTError.valueNotAllowed) {
            try core.writeImmediately(descriptor, value: [], offset: 0, kind: .request, central: nil, mtu: nil)
        }
    }

    @Test(arguments: [0, 1, 3])
    func conditionalsAndLoopsBuildWhatTheyDescribe(count: Int) throws {
        let withBattery = count > 1
        let definition = GATTServerDefinition {
            Service(Self.service) {
                for index in 0..<count {
                    Characteristic(BluetoothUUID(uuid16: UInt16(0x2B00 + index)), properties: .read)
                }
                if withBattery {
                    Characteristic(.batteryLevel, properties: [.read, .notify])
                } else {
                    Characteristic(.deviceName, properties: .read)
                }
            }
            if withBattery {
                AutoManageDevices()
            }
        }
        try definition.validate()
        #expect(definition.services[0].characteristics.count == count + 1)
        #expect(definition.services[0].characteristics.last?.uuid == (withBattery ? .batteryLevel : .deviceName))
        #expect(definition.managesDevicesAutomatically == withBattery)
    }

    @Test func mistakesAreReportedTogetherAndClearly() {
        let definition = GATTServerDefinition {
            Service(Self.service) {
                Characteristic(Self.characteristic, properties: .read)
                Characteristic(Self.characteristic, properties: .read) {
                    Descriptor(.clientCharacteristicConfiguration)
                }
            }
            Service(Self.service)
            OnRead([Self.characteristic]) { _ in [] }
            OnRead([Self.characteristic]) { _ in [] }
            OnWrite([.batteryLevel]) { _ in .store }
        }
        let error = #expect(throws: BluetoothError.self) { try definition.validate() }
        #expect(error?.code == .invalidArguments)
        for problem in [
            "service \(Self.service) is declared twice", "characteristic \(Self.characteristic) is declared twice",
            "two OnRead handlers", "declares a CCCD", "names characteristic \(BluetoothUUID.batteryLevel)",
        ] {
            #expect(error?.message.contains(problem) == true, "missing: \(problem)")
        }
    }

    @Test func defaultPermissionsFollowTheProperties() {
        #expect(Characteristic(Self.characteristic, properties: [.read, .notify]).permissions == .readable)
        #expect(Characteristic(Self.characteristic, properties: [.writeWithoutResponse]).permissions == .writable)
        #expect(Characteristic(Self.characteristic, properties: [.notify]).permissions == [])
    }
}
