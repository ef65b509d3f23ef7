import Able
import AbleDBus
import Testing

extension RealBlueZ {
    /// Able's `GATTServer` on hci1, used from hci0: notifications and indications. (A central
    /// dropped in the middle of a read is a shared scenario.)
    @Suite(.timeLimit(.minutes(2)))
    struct Server {
        /// With 100, the server sends as fast as it can: bluetoothd queues the values for the
        /// link, the central's bluetoothd emits a signal for each, and not one may be lost.
        @Test(arguments: [5, 100])
        func exactlyNNotificationsThenTheSubscriptionStopsOnBothSides(count: Int) async throws {
            final class UUIDs: Sendable {
                let service = BluetoothUUID.random()
                let counter = BluetoothUUID.random()
            }
            let uuids = UUIDs()
            let subscriptions = Recorder<Bool>()
            let definition = GATTServerDefinition {
                Service(uuids.service) { Characteristic(uuids.counter, properties: [.read, .notify], value: [0]) }
                OnSubscriptionChange { _, _, uuid, isSubscribed in
                    if uuid == uuids.counter { subscriptions.append(isSubscribed) }
                }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [uuids.service]) { server, peripheral in
                    let stream = try await peripheral.notifications(
                        of: CharacteristicID(uuids.counter, service: uuids.service))
                    try await eventually("the server to see the subscription") {
                        await server.isSubscribed(CharacteristicID(uuids.counter, service: uuids.service))
                    }
                    #expect(subscriptions.all == [true])
                    for value in 1...count {
                        try await server.notify(
                            CharacteristicID(uuids.counter, service: uuids.service), value: [UInt8(value)])
                    }

                    let received = try await withDeadline(.seconds(60), waitingFor: "\(count) notifications") {
                        var received: [[UInt8]] = []
                        for try await value in stream.prefix(count) { received.append(value) }
                        return received
                    }
                    #expect(received == (1...count).map { [UInt8($0)] })
                    #expect(stream.droppedCount == 0)

                    // Taking the n-th value ended the stream, hence the subscription, in BlueZ too.
                    try await eventually("the server to see the subscription stop") {
                        await !server.isSubscribed(CharacteristicID(uuids.counter, service: uuids.service))
                    }
                    #expect(subscriptions.all == [true, false])
                    let path = try #require(
                        try await rig.bus.characteristicPath(uuids.counter, of: rig.peripheralOnCentral),
                        "hci0's BlueZ has no object for the characteristic")
                    try await eventually("hci0's BlueZ to stop notifying") {
                        try await rig.bus.bluezProperty(
                            "Notifying", of: BlueZ.gattCharacteristic1, at: path, as: Bool.self) == false
                    }
                    #expect(await peripheral.isConnected)
                }
            }
        }

        @Test func anIndicationReturnsOnceTheCentralConfirmedIt() async throws {
            final class UUIDs: Sendable {
                let service = BluetoothUUID.random()
                let status = BluetoothUUID.random()
            }
            let uuids = UUIDs()
            let definition = GATTServerDefinition {
                Service(uuids.service) { Characteristic(uuids.status, properties: [.read, .indicate], value: [0]) }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [uuids.service]) { server, peripheral in
                    let stream = try await peripheral.notifications(
                        of: CharacteristicID(uuids.status, service: uuids.service))
                    try await eventually("the server to see the subscription") {
                        await server.isSubscribed(CharacteristicID(uuids.status, service: uuids.service))
                    }
                    let values = Recorder<[UInt8]>()
                    let consumer = Task {
                        for try await value in stream.prefix(2) { values.append(value) }
                    }
                    defer { consumer.cancel() }
                    try await server.indicate(
                        CharacteristicID(uuids.status, service: uuids.service), value: [0x0A], timeout: .seconds(10))
                    try await server.indicate(
                        CharacteristicID(uuids.status, service: uuids.service), value: [0x0B], timeout: .seconds(10))
                    try await withDeadline(.seconds(10), waitingFor: "two indications") { try await consumer.value }
                    #expect(values.all == [[0x0A], [0x0B]])
                    try await eventually("the server to see the subscription stop") {
                        await !server.isSubscribed(CharacteristicID(uuids.status, service: uuids.service))
                    }
                }
            }
        }
    }
}

extension BlueZ {
    static let gattCharacteristic1 = "org.bluez.GattCharacteristic1"
}

extension DBusConnection {
    /// The object of the characteristic with `uuid` below `device`, as BlueZ exports it on the central.
    func characteristicPath(_ uuid: BluetoothUUID, of device: DBusObjectPath) async throws -> DBusObjectPath? {
        let tree = try await bluezObjects()
        let text = uuid.uuidString
        return tree.objects(with: BlueZ.gattCharacteristic1).first { path, properties in
            path.rawValue.hasPrefix(device.rawValue + "/")
                && (try? properties.decode("UUID", as: String.self)) == text
        }?.key
    }
}
