import Able
import AbleDBus
import Foundation
import Testing

@testable import AbleBlueZ

extension RealBlueZ {
    /// Able's `GATTServer` and advertisement on hci1 against a central Able did not write: the
    /// python3-dbus fixture `gatt-central.py` on hci0.
    @Suite(.timeLimit(.minutes(2)))
    struct ForeignCentral {
        @Test func aForeignCentralFindsReadsWritesAndSubscribes() async throws {
            final class UUIDs: Sendable {
                let service = BluetoothUUID.random()
                let handled = BluetoothUUID.random()
                let stored = BluetoothUUID.random()
                let failing = BluetoothUUID.random()
                let notifier = BluetoothUUID.random()
                let indicator = BluetoothUUID.random()
                let handledDescriptor = BluetoothUUID.random()
                let storedDescriptor = BluetoothUUID.random()

                var handledID: CharacteristicID { CharacteristicID(handled, service: service) }
            }
            let uuids = UUIDs()
            let reads = Recorder<ReadRequest>()
            let writes = Recorder<WriteRequest>()
            let connections = Recorder<Bool>()
            let subscriptions = Recorder<String>()
            let definition = GATTServerDefinition {
                Service(uuids.service) {
                    Characteristic(uuids.handled, properties: [.read, .write]) {
                        Descriptor(uuids.handledDescriptor, permissions: [.readable, .writable])
                    }
                    Characteristic(uuids.stored, properties: [.read, .write, .writeWithoutResponse], value: [1, 2, 3]) {
                        Descriptor(uuids.storedDescriptor, permissions: [.readable, .writable], value: [0x44])
                    }
                    Characteristic(uuids.failing, properties: [.read])
                    Characteristic(uuids.notifier, properties: [.read, .notify], value: [0])
                    Characteristic(uuids.indicator, properties: [.read, .indicate], value: [0])
                }
                OnRead(uuids.handledID, answering: .immediately) { request in
                    reads.append(request)
                    return [0xCA, 0xFE]
                }
                OnWrite(uuids.handledID, answering: .immediately) { request in
                    writes.append(request)
                    return .accept
                }
                OnRead(CharacteristicID(uuids.failing, service: uuids.service), answering: .immediately) { _ in
                    throw ATTError.application(0x81)!
                }
                OnRead(DescriptorID(uuids.handledDescriptor, characteristic: uuids.handledID), answering: .immediately)
                { request in
                    reads.append(request)
                    return [0xD0]
                }
                OnWrite(DescriptorID(uuids.handledDescriptor, characteristic: uuids.handledID), answering: .immediately)
                { request in
                    writes.append(request)
                    return .accept
                }
                OnConnectionStateChange { _, _, isConnected in connections.append(isConnected) }
                OnSubscriptionChange { _, _, uuid, isSubscribed in
                    let name = uuid == uuids.notifier ? "notifier" : uuid == uuids.indicator ? "indicator" : "\(uuid)"
                    subscriptions.append("\(name) \(isSubscribed)")
                }
            }
            try await withRig { rig in
                try await rig.serving(definition) { server in
                    try await rig.withForeignCentral { central in
                        try await rig.findAndConnect(central, advertising: uuids.service)
                        try await eventually("the server to see the central connect") {
                            await server.connectedCentrals.map(\.address) == [rig.centralAddress]
                        }

                        // A read and a write through handlers, which see who asks.
                        #expect(try await central.send(.read(uuids.handled)).value == "cafe")
                        try await central.send(.write(uuids.handled, [0x01, 0x02]))
                        #expect(writes.all.map(\.value) == [[0x01, 0x02]])
                        #expect(reads.all.first?.central?.address == rig.centralAddress)
                        #expect(writes.all.first?.central?.address == rig.centralAddress)
                        #expect(
                            await server.value(of: CharacteristicID(uuids.handled, service: uuids.service)) == [],
                            "the handler said it keeps the value")

                        // The stored value, written with and without response.
                        #expect(try await central.send(.read(uuids.stored)).value == "010203")
                        #expect(try await central.send(.read(uuids.stored, offset: 1)).value == "0203")
                        try await central.send(.write(uuids.stored, [0x04, 0x05]))
                        #expect(
                            await server.value(of: CharacteristicID(uuids.stored, service: uuids.service)) == [
                                0x04, 0x05,
                            ])
                        try await central.send(.write(uuids.stored, [0x06], type: "command"))
                        try await eventually("the write without response to reach the server") {
                            await server.value(of: CharacteristicID(uuids.stored, service: uuids.service)) == [0x06]
                        }
                        #expect(try await central.send(.read(uuids.stored)).value == "06")

                        // An ATT error from a handler, as BlueZ hands it to the central.
                        let failed = try await central.attempt(.read(uuids.failing))
                        #expect(failed.error == "org.bluez.Error.Failed", "\(failed)")
                        #expect(failed.message?.lowercased().hasSuffix("0x81") == true, "\(failed)")

                        // Descriptors: one through handlers, one stored.
                        let readsBefore = reads.all.count
                        #expect(
                            try await central.send(.readDescriptor(uuids.handledDescriptor, of: uuids.handled)).value
                                == "d0")
                        #expect(reads.all.count == readsBefore + 1)
                        #expect(reads.all.last?.characteristicUUID == uuids.handled)
                        try await central.send(.writeDescriptor(uuids.handledDescriptor, of: uuids.handled, [0xD1]))
                        #expect(writes.all.last?.value == [0xD1])
                        #expect(writes.all.last?.uuid == uuids.handledDescriptor)
                        #expect(
                            try await central.send(.readDescriptor(uuids.storedDescriptor, of: uuids.stored)).value
                                == "44")
                        try await central.send(.writeDescriptor(uuids.storedDescriptor, of: uuids.stored, [0x55]))
                        #expect(
                            try await central.send(.readDescriptor(uuids.storedDescriptor, of: uuids.stored)).value
                                == "55")

                        // Notifications: exactly what the server sent, in order.
                        try await central.send(.subscribe(uuids.notifier))
                        try await eventually("the server to see the subscription") {
                            await server.isSubscribed(CharacteristicID(uuids.notifier, service: uuids.service))
                        }
                        for value: UInt8 in 1...3 {
                            try await server.notify(
                                CharacteristicID(uuids.notifier, service: uuids.service), value: [value])
                        }
                        let notified = try await central.send(.take(uuids.notifier, count: 3))
                        #expect(notified.values == ["01", "02", "03"])

                        // An indication returns once the central's BlueZ confirmed it.
                        try await central.send(.subscribe(uuids.indicator))
                        try await eventually("the server to see the indication subscription") {
                            await server.isSubscribed(CharacteristicID(uuids.indicator, service: uuids.service))
                        }
                        try await server.indicate(
                            CharacteristicID(uuids.indicator, service: uuids.service), value: [0x0A],
                            timeout: .seconds(10))
                        #expect(try await central.send(.take(uuids.indicator, count: 1)).values == ["0a"])

                        try await central.send(.unsubscribe(uuids.notifier))
                        try await central.send(.unsubscribe(uuids.indicator))
                        try await eventually("the server to see both subscriptions end") {
                            let notifier = await server.isSubscribed(
                                CharacteristicID(uuids.notifier, service: uuids.service))
                            let indicator = await server.isSubscribed(
                                CharacteristicID(uuids.indicator, service: uuids.service))
                            return !notifier && !indicator
                        }
                        #expect(
                            subscriptions.all == [
                                "notifier true", "indicator true", "notifier false", "indicator false",
                            ])

                        try await central.send(.op("disconnect"))
                        try await eventually("the server to see the central go") {
                            await server.connectedCentrals.isEmpty
                        }
                        try await eventually("the connection handler to hear of the disconnect") {
                            connections.last == false
                        }
                        // (BlueZ 5.66 may not announce Connected = true, so a `true` may be missing.)
                        #expect(connections.all.filter { !$0 }.count == 1, "\(connections.all)")
                    }
                }
            }
        }

        @Test func catchAllHandlersAnswerAndOtherProcessesAreRefusedAndTheServerReopens() async throws {
            final class UUIDs: Sendable {
                let service = BluetoothUUID.random()
                let characteristic = BluetoothUUID.random()
                let descriptor = BluetoothUUID.random()
            }
            let uuids = UUIDs()
            let reads = Recorder<ReadRequest>()
            let writes = Recorder<WriteRequest>()
            let definition = GATTServerDefinition {
                Service(uuids.service) {
                    Characteristic(uuids.characteristic, properties: [.read, .write], value: [0x01]) {
                        Descriptor(uuids.descriptor, permissions: [.readable, .writable], value: [0x02])
                    }
                }
                OnRead(.anyCharacteristic, answering: .immediately) { request in
                    reads.append(request)
                    return [0xA0] + request.storedValue
                }
                OnWrite(.anyCharacteristic, answering: .immediately) { request in
                    writes.append(request)
                    return .store
                }
                OnRead(.anyDescriptor, answering: .immediately) { request in
                    reads.append(request)
                    return [0xD0] + request.storedValue
                }
                OnWrite(.anyDescriptor, answering: .immediately) { request in
                    writes.append(request)
                    return .store
                }
            }
            try await withRig { rig in
                try await rig.withForeignCentral { central in
                    let server = try await GATTServer.start(on: rig.peripheral, definition: definition)
                    try await withCleanup {
                        try await rig.findAndConnect(central, advertising: uuids.service)
                        // Every catch-all answers, and sees what it answers.
                        #expect(try await central.send(.read(uuids.characteristic)).value == "a001")
                        try await central.send(.write(uuids.characteristic, [0x11]))
                        #expect(try await central.send(.read(uuids.characteristic)).value == "a011")
                        #expect(
                            try await central.send(.readDescriptor(uuids.descriptor, of: uuids.characteristic)).value
                                == "d002")
                        try await central.send(.writeDescriptor(uuids.descriptor, of: uuids.characteristic, [0x22]))
                        #expect(
                            try await central.send(.readDescriptor(uuids.descriptor, of: uuids.characteristic)).value
                                == "d022")
                        #expect(
                            reads.all.map(\.uuid) == [
                                uuids.characteristic, uuids.characteristic, uuids.descriptor, uuids.descriptor,
                            ])
                        #expect(writes.all.map(\.value) == [[0x11], [0x22]])

                        // The central's process calling the server's objects itself is refused by
                        // Able (not by the bus: BlueZ's bus policy lets root call these interfaces
                        // anywhere), and nothing changes.
                        let application = try #require(
                            await server.backend as? BlueZGATTApplication, "not served by BlueZ")
                        let exported = Exported(
                            name: application.system.connection.uniqueName, root: application.root.rawValue)
                        let probe = try await central.send(.callExported(exported))
                        let calls = probe.calls ?? []
                        #expect(calls.count == 7, "\(calls)")
                        for call in calls {
                            #expect(
                                call.error == "org.freedesktop.DBus.Error.AccessDenied"
                                    && call.message?.hasSuffix("may not call \(call.path)") == true,
                                "\(call.method) on \(call.path): \(call.error ?? "answered") \(call.message ?? "")")
                        }
                        #expect(reads.all.count == 4 && writes.all.count == 2, "a refused call reached a handler")
                        #expect(
                            await server.value(of: CharacteristicID(uuids.characteristic, service: uuids.service)) == [
                                0x11
                            ])

                        // Closed, the server exports nothing any more.
                        await server.close()
                        #expect(await !server.isOpen)
                        let afterClose = try await central.send(.callExported(exported))
                        #expect(
                            afterClose.calls?.allSatisfy { $0.error == "org.freedesktop.DBus.Error.UnknownObject" }
                                == true, "after close: \(afterClose.calls ?? [])")
                        try await central.send(.op("disconnect"))
                    } cleanup: {
                        await server.close()
                    }

                    // Opened again from the stored definition, it serves the definition's values.
                    await rig.forgetEachOther()
                    try await rig.serving(definition) { reopened in
                        try await rig.findAndConnect(central, advertising: uuids.service)
                        #expect(try await central.send(.read(uuids.characteristic)).value == "a001")
                        #expect(
                            await reopened.value(of: CharacteristicID(uuids.characteristic, service: uuids.service))
                                == [0x01])
                        try await central.send(.op("disconnect"))
                    }
                }
            }
        }
    }
}

extension Rig {
    /// Runs `body` with the fixture `gatt-central.py` on hci0, and stops it afterwards.
    func withForeignCentral<T>(_ body: (ForeignCentral) async throws -> T) async throws -> T {
        let central = try ForeignCentral.start(on: Guest.central)
        return try await withCleanup {
            try await body(central)
        } cleanup: {
            await central.stop()
        }
    }

    /// Has `central` discover hci1 by `service` and connect, while Able advertises it there.
    ///
    /// Discovery starts before the advertisement: the kernel drops a report that comes earlier.
    func findAndConnect(_ central: ForeignCentral, advertising service: BluetoothUUID) async throws {
        try await central.send(.scanStart(service))
        let advertising = try await peripheral.startAdvertising(
            Able.Advertisement(localName: "able", serviceUUIDs: [service]))
        try await withCleanup {
            let found = try await central.send(.scanFind(service, timeout: Rig.discoveryTimeout))
            #expect(found.address == peripheralAddress.description)
            #expect(found.uuids?.contains(service.uuidString) == true, "\(found.uuids ?? [])")
            try await central.send(.connect(peripheralAddress, timeout: Rig.connectTimeout))
        } cleanup: {
            await advertising.stop()
        }
    }
}

/// Where a GATT server's objects are on the bus: its connection's unique name and its root.
struct Exported: Sendable {
    var name: String
    var root: String
    /// The first characteristic and its first descriptor, where Able exports them.
    var attributes: [String] { ["\(root)/service0/char0", "\(root)/service0/char0/desc0"] }
}

extension ForeignCentral.Request {
    static func scanStart(_ uuid: BluetoothUUID) -> Self { Self(op: "scan-start", uuid: uuid.uuidString) }

    static func scanFind(_ uuid: BluetoothUUID, timeout: Duration) -> Self {
        Self(op: "scan-find", uuid: uuid.uuidString, timeout: Double(timeout.components.seconds))
    }

    static func connect(_ address: BluetoothAddress, timeout: Duration) -> Self {
        Self(op: "connect", address: address.description, timeout: Double(timeout.components.seconds))
    }

    static func read(_ uuid: BluetoothUUID, offset: Int? = nil) -> Self {
        Self(op: "read", uuid: uuid.uuidString, offset: offset)
    }

    static func write(_ uuid: BluetoothUUID, _ value: [UInt8], type: String? = nil) -> Self {
        Self(op: "write", uuid: uuid.uuidString, value: value.hex, type: type)
    }

    static func readDescriptor(_ uuid: BluetoothUUID, of characteristic: BluetoothUUID) -> Self {
        Self(op: "read-descriptor", uuid: uuid.uuidString, characteristic: characteristic.uuidString)
    }

    static func writeDescriptor(_ uuid: BluetoothUUID, of characteristic: BluetoothUUID, _ value: [UInt8]) -> Self {
        Self(op: "write-descriptor", uuid: uuid.uuidString, characteristic: characteristic.uuidString, value: value.hex)
    }

    static func subscribe(_ uuid: BluetoothUUID) -> Self { Self(op: "subscribe", uuid: uuid.uuidString) }

    static func unsubscribe(_ uuid: BluetoothUUID) -> Self { Self(op: "unsubscribe", uuid: uuid.uuidString) }

    static func take(_ uuid: BluetoothUUID, count: Int, timeout: Duration = .seconds(15)) -> Self {
        Self(op: "take", uuid: uuid.uuidString, count: count, timeout: Double(timeout.components.seconds))
    }

    static func callExported(_ exported: Exported) -> Self {
        Self(op: "call-exported", name: exported.name, root: exported.root, paths: exported.attributes)
    }
}
