import Testing

@testable import Able

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
