import Able
import AbleDBus
import Testing

extension RealBlueZ {
    /// Able's `GATTServer` on hci1, used from hci0: notifications, indications, and a central
    /// dropped in the middle of a read.
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
                        await server.isSubscribed(uuids.counter)
                    }
                    #expect(subscriptions.all == [true])
                    for value in 1...count { try await server.notify(uuids.counter, value: [UInt8(value)]) }

                    let received = try await withDeadline(.seconds(60), waitingFor: "\(count) notifications") {
                        var received: [[UInt8]] = []
                        for try await value in stream.prefix(count) { received.append(value) }
                        return received
                    }
                    #expect(received == (1...count).map { [UInt8($0)] })
                    #expect(stream.droppedCount == 0)

                    // Taking the n-th value ended the stream, hence the subscription, in BlueZ too.
                    try await eventually("the server to see the subscription stop") {
                        await !server.isSubscribed(uuids.counter)
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
                        await server.isSubscribed(uuids.status)
                    }
                    let values = Recorder<[UInt8]>()
                    let consumer = Task {
                        for try await value in stream.prefix(2) { values.append(value) }
                    }
                    defer { consumer.cancel() }
                    try await server.indicate(uuids.status, value: [0x0A], timeout: .seconds(10))
                    try await server.indicate(uuids.status, value: [0x0B], timeout: .seconds(10))
                    try await withDeadline(.seconds(10), waitingFor: "two indications") { try await consumer.value }
                    #expect(values.all == [[0x0A], [0x0B]])
                    try await eventually("the server to see the subscription stop") {
                        await !server.isSubscribed(uuids.status)
                    }
                }
            }
        }

        @Test func aCentralDisconnectedInTheMiddleOfAReadGetsAnErrorNotAHang() async throws {
            final class UUIDs: Sendable {
                let service = BluetoothUUID.random()
                let slow = BluetoothUUID.random()
            }
            let uuids = UUIDs()
            let readers = Recorder<Able.Central?>()
            let connections = Recorder<Bool>()
            let definition = GATTServerDefinition {
                Service(uuids.service) { Characteristic(uuids.slow, properties: [.read]) }
                // Longer than the 2 s BlueZ waits between Device1.Disconnect and dropping the link.
                OnRead([uuids.slow]) { request in
                    readers.append(request.central)
                    try? await Task.sleep(for: .seconds(5))
                    return [1]
                }
                OnConnectionStateChange { _, _, isConnected in connections.append(isConnected) }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [uuids.service]) { server, peripheral in
                    // BlueZ 5.66 may not announce Connected = true: the server must see the central anyway.
                    try await eventually("the server to list the central") {
                        await server.connectedCentrals.map(\.address) == [rig.centralAddress]
                    }
                    let read = Task { try await peripheral.read(CharacteristicID(uuids.slow, service: uuids.service)) }
                    try await eventually("the server's handler to start reading") { !readers.all.isEmpty }
                    let central = try #require(readers.all.first ?? nil, "BlueZ did not say who reads")
                    #expect(central.address == rig.centralAddress)
                    let start = ContinuousClock.now
                    try await server.disconnect(central)

                    let outcome = try await withDeadline(.seconds(15), waitingFor: "the interrupted read to return") {
                        await read.result
                    }
                    let elapsed = ContinuousClock.now - start
                    switch outcome {
                    case .success(let value): Issue.record("the read returned \(value) after the link dropped")
                    case .failure(let error):
                        // BlueZ fails a request the link drop interrupted with ATT's Unlikely Error;
                        // Able reports it as the disconnect it is.
                        let error = try #require(error as? BluetoothError, "the read threw \(error)")
                        #expect(error.code == .disconnected, "the read threw \(error.debugDescription)")
                    }
                    #expect(elapsed < .seconds(4.5), "the read failed \(elapsed) after the disconnect")
                    try await eventually("the central to see the link drop") { await !peripheral.isConnected }
                    try await eventually("the server to see the central go") {
                        await server.connectedCentrals.isEmpty
                    }
                    #expect(connections.last == false, "connection events: \(connections.all)")
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
