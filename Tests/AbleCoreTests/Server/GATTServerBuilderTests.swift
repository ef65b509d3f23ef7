import AbleIO
import Dispatch
import Testing

@testable import AbleCore

@Suite struct GATTServerBuilderTests {
    static let service: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
    static let characteristic: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A52553A"
    static let descriptor = BluetoothUUID.characteristicUserDescription

    static let characteristicID = CharacteristicID(characteristic, service: service)
    static let descriptorID = DescriptorID(descriptor, characteristic: characteristicID)

    @Test func everyComponentLandsInTheDefinition() throws {
        let definition = GATTServerDefinition {
            Service(Self.service) {
                Characteristic(Self.characteristic, properties: [.read, .indicate], permissions: .readable) {
                    Descriptor(Self.descriptor, permissions: [.readable, .writable], value: Array("psm".utf8))
                }
            }
            Service(.batteryService, .secondary)
            AutoManageDevices()
            OnRead(Self.characteristicID) { _ in [1] }
            OnWrite(Self.characteristicID) { _ in .store }
            OnRead(Self.descriptorID) { _ in [2] }
            OnWrite(Self.descriptorID) { _ in .accept }
            OnRead(.anyCharacteristic) { _ in [] }
            OnWrite(.anyCharacteristic) { _ in .store }
            OnRead(.anyDescriptor) { _ in [] }
            OnWrite(.anyDescriptor) { _ in .store }
            OnConnectionStateChange { _, _, _ in }
            OnSubscriptionChange { _, _, _, _ in }
            OnStateChange { _, _ in }
        }
        try definition.validate()
        #expect(definition.services.map(\.uuid) == [Self.service, .batteryService])
        #expect(definition.services[1].kind == .secondary)
        #expect(definition.services[0].characteristics[0].descriptors[0].value == Array("psm".utf8))
        #expect(definition.managesDevicesAutomatically)
        #expect(definition.reads.characteristics[Self.characteristic] != nil)
        #expect(definition.writes.handler(for: Self.characteristic, descriptor: Self.descriptor) != nil)
        #expect(definition.reads.anyCharacteristic != nil && definition.writes.anyDescriptor != nil)
        #expect(definition.connectionHandlers.count == 1 && definition.stateHandlers.count == 1)
    }

    /// A handler's kind is the one it is declared with, whatever its body: without `answering:` it
    /// runs in a task, even with no `await` in its body (or as a function that is not `async`);
    /// with `answering: .immediately` it is immediate. The server core answers reads and writes
    /// without suspending only when no handler of the attribute runs in a task.
    @Test func aHandlersKindIsTheOneItIsDeclaredWith() throws {
        @Sendable func now(_ request: ReadRequest) -> [UInt8] { [3] }
        let other: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525500"
        let definition = GATTServerDefinition {
            Service(Self.service) {
                Characteristic(Self.characteristic, properties: [.read, .write]) {
                    Descriptor(Self.descriptor, permissions: [.readable, .writable])
                }
                Characteristic(other, properties: [.read, .write])
            }
            OnRead(Self.characteristicID, answering: .immediately) { _ in [1] }
            OnWrite(Self.characteristicID) { _ in .store }
            OnRead(Self.descriptorID, handler: now)
            OnWrite(Self.descriptorID, answering: .immediately) { request in
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
        #expect(isImmediate(definition.reads.handler(for: Self.characteristic, descriptor: nil)))
        #expect(!isImmediate(definition.writes.handler(for: Self.characteristic, descriptor: nil)))
        #expect(!isImmediate(definition.reads.handler(for: Self.characteristic, descriptor: Self.descriptor)))
        #expect(isImmediate(definition.writes.handler(for: Self.characteristic, descriptor: Self.descriptor)))

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

    /// An immediate handler is called where the request is answered, with no task made: called
    /// from a thread outside any task, it sees none. A handler that runs in a task gets a task of
    /// its own for a request that names its central, even when its body never suspends, and may
    /// suspend in it.
    @Test func anImmediateHandlerRunsInlineAndAnotherInATaskOfItsOwn() async throws {
        let other: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525500"
        let otherID = CharacteristicID(other, service: Self.service)
        let seen = Lock<[String]>([])
        let core = GATTServerCore(
            definition: GATTServerDefinition {
                Service(Self.service) {
                    Characteristic(Self.characteristic, properties: [.read, .write])
                    Characteristic(other, properties: [.read, .write])
                }
                OnRead(Self.characteristicID, answering: .immediately) { _ in
                    seen.withLock { $0.append("immediate read in a task: \(withUnsafeCurrentTask { $0 != nil })") }
                    return [1]
                }
                OnWrite(Self.characteristicID) { _ in
                    seen.withLock { $0.append("write in a task: \(withUnsafeCurrentTask { $0 != nil })") }
                    return .store
                }
                OnRead(otherID) { _ in
                    await Task.yield()
                    return [2]
                }
            })
        let characteristic = AttributeID(service: 0, characteristic: 0)
        let answer = await withCheckedContinuation { (answer: CheckedContinuation<[UInt8]?, Never>) in
            DispatchQueue(label: "not a task").async {
                answer.resume(returning: try? core.readImmediately(characteristic, central: nil, offset: 0, mtu: nil))
            }
        }
        #expect(answer == [1])
        let central = Central(address: "11:22:33:44:55:66")
        let callersTask = withUnsafeCurrentTask { $0?.hashValue }
        let handlersTask = Lock<Int?>(nil)
        let spy = GATTServerCore(
            definition: GATTServerDefinition {
                Service(Self.service) { Characteristic(Self.characteristic, properties: [.read]) }
                OnRead(Self.characteristicID) { _ in
                    let task = withUnsafeCurrentTask { $0?.hashValue }
                    handlersTask.withLock { $0 = task }
                    return [3]
                }
            })
        #expect(try await spy.read(characteristic, central: central, offset: 0, mtu: nil) == [3])
        #expect(handlersTask.withLock { $0 } != nil && handlersTask.withLock { $0 } != callersTask)
        #expect(!spy.answersReadsImmediately(characteristic))
        try await core.write(characteristic, value: [9], offset: 0, kind: .request, central: central, mtu: nil)
        #expect(core.storedValue(characteristic) == [9])
        #expect(
            try await core.read(AttributeID(service: 0, characteristic: 1), central: central, offset: 0, mtu: nil) == [
                2
            ])
        #expect(seen.withLock { $0 } == ["immediate read in a task: false", "write in a task: true"])
    }

    /// A handler that names an attribute answers it whatever the order of declaration; the
    /// catch-alls answer the rest, each for its kind of attribute only; a descriptor named through
    /// its identifier is its characteristic's only.
    @Test func aHandlerThatNamesAnAttributeComesBeforeTheCatchAll() async throws {
        let other: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525500"
        let otherID = CharacteristicID(other, service: Self.service)
        let core = GATTServerCore(
            definition: GATTServerDefinition {
                Service(Self.service) {
                    for uuid in [Self.characteristic, other] {
                        Characteristic(uuid, properties: [.read]) { Descriptor(Self.descriptor, value: [0xD0]) }
                    }
                }
                OnRead(.anyCharacteristic, answering: .immediately) { _ in [0xAC] }
                OnRead(.anyDescriptor) { _ in [0xAD] }
                OnRead(Self.characteristicID) { _ in [0x01] }
                OnRead(Self.descriptorID, answering: .immediately) { _ in [0xD1] }
            })
        func read(_ service: Int, _ characteristic: Int, _ descriptor: Int? = nil) async throws -> [UInt8] {
            try await core.read(
                AttributeID(service: service, characteristic: characteristic, descriptor: descriptor), central: nil,
                offset: 0, mtu: nil)
        }
        #expect(try await read(0, 0) == [0x01])
        #expect(try await read(0, 1) == [0xAC])
        #expect(try await read(0, 0, 0) == [0xD1])
        #expect(try await read(0, 1, 0) == [0xAD], "\(otherID)'s descriptor of the same UUID")

        let withoutCatchAlls = GATTServerCore(
            definition: GATTServerDefinition {
                Service(Self.service) {
                    Characteristic(Self.characteristic, properties: [.read]) {
                        Descriptor(Self.descriptor, value: [0xD0])
                    }
                }
                OnRead(.anyDescriptor) { _ in [0xAD] }
            })
        let characteristic = AttributeID(service: 0, characteristic: 0)
        #expect(
            withoutCatchAlls.answersReadsImmediately(characteristic), "a descriptor catch-all answers no characteristic"
        )
        #expect(try withoutCatchAlls.readImmediately(characteristic, central: nil, offset: 0, mtu: nil) == [])
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
            OnRead(Self.characteristicID) { _ in [] }
            OnRead(Self.characteristicID, answering: .immediately) { _ in [] }
            OnWrite(CharacteristicID(.batteryLevel, service: Self.service)) { _ in .store }
            OnRead(.anyDescriptor) { _ in [] }
            OnRead(.anyDescriptor, answering: .immediately) { _ in [] }
            OnWrite(CharacteristicID(Self.characteristic, service: .batteryService)) { _ in .store }
            OnWrite(DescriptorID(.characteristicUserDescription, characteristic: Self.characteristicID)) { _ in .store }
        }
        let error = #expect(throws: BluetoothError.self) { try definition.validate() }
        #expect(error?.code == .invalidArguments)
        for problem in [
            "service \(Self.service) is declared twice", "characteristic \(Self.characteristic) is declared twice",
            "two OnRead handlers for characteristic \(Self.characteristic) of service \(Self.service)",
            "two OnRead(.anyDescriptor) handlers", "declares a CCCD",
            "names characteristic \(BluetoothUUID.batteryLevel) of service \(Self.service), which",
            "names characteristic \(Self.characteristic) of service \(BluetoothUUID.batteryService), which",
            "names descriptor \(BluetoothUUID.characteristicUserDescription) of characteristic \(Self.characteristic)",
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
