import Able
import AbleDBus
import Testing

extension RealBlueZ {
    /// The GATT client's sockets (`AcquireWrite`, `AcquireNotify`) and its long and reliable
    /// writes, between hci0 and Able's own server on hci1.
    @Suite(.timeLimit(.minutes(3)))
    struct FastPaths {
        /// The central's BlueZ object of the characteristic with `uuid`.
        static func characteristicObject(_ uuid: BluetoothUUID, rig: Rig) async throws -> DBusObjectPath {
            let tree = try await rig.bus.bluezObjects()
            let found = tree.objects(with: "org.bluez.GattCharacteristic1").first { path, properties in
                path.rawValue.hasPrefix(rig.peripheralOnCentral.rawValue + "/")
                    && (try? properties.decode("UUID", as: String.self))??.lowercased() == uuid.uuidString.lowercased()
            }
            return try #require(found?.key, "BlueZ has no characteristic \(uuid) on hci0")
        }

        static func flag(_ name: String, of path: DBusObjectPath, rig: Rig) async -> Bool? {
            try? await rig.bus.bluezProperty(name, of: "org.bluez.GattCharacteristic1", at: path, as: Bool.self)
        }

        @Test func aTenThousandPacketTransferThroughAcquireWriteArrivesCompleteAndInOrder() async throws {
            let service = BluetoothUUID.random()
            let sink = CharacteristicID(.random(), service: service)
            let received = Recorder<[UInt8]>()
            let definition = GATTServerDefinition {
                Service(service) { Characteristic(sink.uuid, properties: [.write, .writeWithoutResponse]) }
                OnWrite([sink.uuid]) { request in
                    received.append(request.value)
                    return .accept
                }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [service]) { _, peripheral in
                    let characteristic = try await peripheral.characteristic(sink)
                    let size = await peripheral.maximumWriteLength(for: characteristic, type: .withoutResponse)
                    let count = 10_000
                    let packets = (0..<count).map { index in
                        (0..<size).map { byte in byte < 4 ? UInt8(truncatingIfNeeded: index >> (8 * byte)) : 0xA5 }
                    }
                    var lastReported = 0
                    try await peripheral.writeWithoutResponse(packets, to: sink) { lastReported = $0 }
                    #expect(lastReported == count)
                    let path = try await Self.characteristicObject(sink.uuid, rig: rig)
                    #expect(await Self.flag("WriteAcquired", of: path, rig: rig) == true)
                    try await eventually("the server to receive \(count) packets", timeout: .seconds(120)) {
                        received.all.count >= count
                    }
                    #expect(received.all.count == count)
                    #expect(received.all == packets, "\(size)-byte packets arrived out of order or altered")

                    // Released on disconnect, acquired again after reconnecting.
                    try await peripheral.disconnect()
                    try await eventually("BlueZ to release the write socket") {
                        await Self.flag("WriteAcquired", of: path, rig: rig) != true
                    }
                    try await peripheral.connect(timeout: Rig.connectTimeout)
                    try await peripheral.write([1, 2, 3], to: sink, type: .withoutResponse)
                    let again = try await Self.characteristicObject(sink.uuid, rig: rig)
                    #expect(await Self.flag("WriteAcquired", of: again, rig: rig) == true)
                    try await eventually("the write after reconnecting to arrive") { received.all.last == [1, 2, 3] }
                }
            }
        }

        @Test(arguments: [5, 1000])
        func exactlyNNotificationsThroughAcquireNotify(count: Int) async throws {
            let service = BluetoothUUID.random()
            let counter = CharacteristicID(.random(), service: service)
            let definition = GATTServerDefinition {
                Service(service) { Characteristic(counter.uuid, properties: [.read, .notify], value: [0]) }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [service]) { server, peripheral in
                    let stream = try await peripheral.notifications(of: counter, delivery: .socket)
                    let path = try await Self.characteristicObject(counter.uuid, rig: rig)
                    #expect(await Self.flag("NotifyAcquired", of: path, rig: rig) == true)
                    try await eventually("the server to see the subscription") {
                        await server.isSubscribed(counter.uuid)
                    }
                    let consumer = Task {
                        var received: [[UInt8]] = []
                        for try await value in stream.prefix(count) { received.append(value) }
                        return received
                    }
                    for value in 0..<(count + 2) {
                        try await server.notify(counter, value: [UInt8(value >> 8), UInt8(value & 0xFF)])
                    }
                    let received = try await consumer.value
                    #expect(received == (0..<count).map { [UInt8($0 >> 8), UInt8($0 & 0xFF)] })
                    try await eventually("the subscription to stop") { await !server.isSubscribed(counter.uuid) }
                    #expect(await Self.flag("NotifyAcquired", of: path, rig: rig) != true)
                    #expect(await peripheral.isConnected)
                }
            }
        }

        @Test func aLongWriteOf512BytesAndAReliableWriteReachTheServerWithTheirOffsets() async throws {
            let service = BluetoothUUID.random()
            let record = CharacteristicID(.random(), service: service)
            let writes = Recorder<(offset: Int, count: Int, isPrepared: Bool)>()
            let definition = GATTServerDefinition {
                Service(service) {
                    Characteristic(
                        record.uuid, properties: [.read, .write],
                        permissions: [.readable, .writable, .authorizePreparedWrites])
                }
                OnWrite([record.uuid]) { request in
                    writes.append((request.offset, request.value.count, request.isPrepared))
                    return .store
                }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [service]) { server, peripheral in
                    // 512 bytes at offset 0 fit one PDU at BlueZ's MTU of 517: at offset 1 they are a long write.
                    let value = (0..<511).map { UInt8($0 & 0xFF) }
                    try await peripheral.write([0xFF], to: record)
                    try await peripheral.write(value, to: record, offset: 1)
                    #expect(await server.value(of: record.uuid) == [0xFF] + value)
                    #expect(try await peripheral.read(record) == [0xFF] + value)
                    let long = writes.all.dropFirst()
                    #expect(long.first.map { ($0.offset, $0.isPrepared) } ?? (-1, false) == (1, true))
                    let executed = long.filter { !$0.isPrepared }
                    #expect(executed.map(\.count).reduce(0, +) == 511)
                    #expect(executed.first?.offset == 1)

                    let before = writes.all.count
                    let reliable = Array(repeating: UInt8(0x3C), count: 512)
                    try await peripheral.write(reliable, to: record, type: .reliable)
                    #expect(await server.value(of: record.uuid) == reliable)
                    let pieces = writes.all.dropFirst(before)
                    #expect(pieces.first.map { ($0.offset, $0.isPrepared) } ?? (-1, false) == (0, true))
                    #expect(pieces.filter { !$0.isPrepared }.map(\.count).reduce(0, +) == 512)
                }
            }
        }
    }
}
