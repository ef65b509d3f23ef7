import Able
import AbleBlueZ
import AbleDBus
import Testing

extension RealBlueZ {
    /// The GATT client's sockets (`AcquireWrite`, `AcquireNotify`) and its long and reliable
    /// writes, between hci0 and Able's own server on hci1.
    @Suite(.timeLimit(.minutes(5)))
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

        /// The index a firmware packet carries in its first 4 bytes.
        static func index(_ packet: [UInt8]) -> Int {
            packet.prefix(4).enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
        }

        static func flag(_ name: String, of path: DBusObjectPath, rig: Rig) async -> Bool? {
            try? await rig.bus.bluezProperty(name, of: "org.bluez.GattCharacteristic1", at: path, as: Bool.self)
        }

        @Test func aThousandPacketTransferThroughAcquireWriteArrivesCompleteAndInOrder() async throws {
            let service = BluetoothUUID.random()
            let sink = CharacteristicID(.random(), service: service)
            let received = Recorder<[UInt8]>()
            let definition = GATTServerDefinition {
                Service(service) { Characteristic(sink.uuid, properties: [.write, .writeWithoutResponse]) }
                OnWrite(sink, answering: .immediately) { request in
                    received.append(request.value)
                    return .accept
                }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [service]) { _, peripheral in
                    // Firmware-style: 20-byte packets, what the smallest MTU allows. The guest's
                    // emulated link carries about 10 Write Commands a second (btmon on hci1), so
                    // 10,000 would take 17 minutes: 1,000 here.
                    let size = 20
                    let count = 1_000
                    let packets = (0..<count).map { index in
                        (0..<size).map { byte in byte < 4 ? UInt8(truncatingIfNeeded: index >> (8 * byte)) : 0xA5 }
                    }
                    var lastReported = 0
                    try await peripheral.writeWithoutResponse(packets, to: sink) { lastReported = $0 }
                    #expect(lastReported == count)
                    let path = try await Self.characteristicObject(sink.uuid, rig: rig)
                    #expect(await Self.flag("WriteAcquired", of: path, rig: rig) == true)
                    try await eventually("the server to receive \(count) packets", timeout: .seconds(180)) {
                        received.all.count >= count
                    }
                    #expect(received.all.count == count)
                    // Complete, unaltered, none twice. The order on the air is BlueZ's: it sends
                    // Write Commands over every EATT bearer, and on 5.66 the server saw packets
                    // 1 and 2 swapped once in 1,000. Able's socket keeps the order it was given
                    // (AcquiredSocketTests, simulator scenario).
                    let sortedByIndex = received.all.sorted { Self.index($0) < Self.index($1) }
                    #expect(sortedByIndex == packets, "\(size)-byte packets were lost, altered or duplicated")

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

        /// BlueZ's MTU of 517 would allow 514 bytes, but an attribute value holds at most 512:
        /// `bluetoothd` reads the write socket into a 512-byte buffer (a longer message arrives
        /// cut short) and the server's BlueZ drops a longer Write Command. Able says 512, and
        /// the longest value the server's BlueZ takes arrives whole.
        @Test func theLongestWriteWithoutResponseIsAnAttributeValueAndArrivesWhole() async throws {
            let service = BluetoothUUID.random()
            let sink = CharacteristicID(.random(), service: service)
            let received = Recorder<[UInt8]>()
            let definition = GATTServerDefinition {
                Service(service) { Characteristic(sink.uuid, properties: [.write, .writeWithoutResponse]) }
                OnWrite(sink, answering: .immediately) { request in
                    received.append(request.value)
                    return .accept
                }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [service]) { _, peripheral in
                    try await peripheral.write([0], to: sink, type: .withoutResponse)
                    let characteristic = try await peripheral.characteristic(sink)
                    let mtu = try #require(try await peripheral.mtu(of: sink))
                    let limit = await peripheral.maximumWriteLength(for: characteristic, type: .withoutResponse)
                    #expect(limit == min(mtu - 3, 512))
                    let tooLong = await #expect(throws: BluetoothError.self) {
                        try await peripheral.write(
                            Array(repeating: 7, count: limit + 1), to: sink, type: .withoutResponse)
                    }
                    #expect(tooLong?.code == .valueTooLong)
                    // The server here is BlueZ too. 5.66's shared/gatt-server.c write_cb checks the
                    // value's length with the 2-byte handle counted (check_length(length, 0)), so it
                    // drops a Write Command of 511 or 512 bytes without a word; 5.82 takes 512.
                    let serverTakes = Guest.bluezVersion.map { $0 <= .init(5, 66) } == true ? 510 : 512
                    let longest = (0..<min(limit, serverTakes)).map { UInt8(truncatingIfNeeded: $0) }
                    try await peripheral.write(longest, to: sink, type: .withoutResponse)
                    try await eventually("the longest write to arrive", timeout: .seconds(30)) {
                        received.all.count >= 2
                    }
                    #expect(
                        received.all.last == longest,
                        "\(received.all.last?.count ?? 0) bytes arrived of \(longest.count)")
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
                        await server.isSubscribed(counter)
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
                    // Exactly `count` values, none twice. BlueZ sends notifications over every
                    // EATT bearer it has (two between these controllers), so the central can get
                    // runs of them swapped: seen with 1000 on 5.66. Able's own path keeps the
                    // socket's order (AcquiredSocketTests on the D-Bus tier).
                    let numbers = received.map { Int($0[0]) << 8 | Int($0[1]) }
                    #expect(numbers.count == count)
                    #expect(Set(numbers).count == count)
                    #expect(numbers.allSatisfy { (0..<(count + 2)).contains($0) })
                    if count <= 5 { #expect(numbers == Array(0..<count)) }
                    try await eventually("the subscription to stop") { await !server.isSubscribed(counter) }
                    #expect(await Self.flag("NotifyAcquired", of: path, rig: rig) != true)
                    #expect(await peripheral.isConnected)
                }
            }
        }

        /// The server that sees the offsets: the prepared write's first piece (to authorize) and
        /// then every piece.
        static func recordingServer(_ service: BluetoothUUID, _ record: CharacteristicID) -> (
            GATTServerDefinition, Recorder<(offset: Int, count: Int, isPrepared: Bool)>
        ) {
            let writes = Recorder<(offset: Int, count: Int, isPrepared: Bool)>()
            let definition = GATTServerDefinition {
                Service(service) {
                    Characteristic(
                        record.uuid, properties: [.read, .write],
                        permissions: [.readable, .writable, .authorizePreparedWrites])
                }
                OnWrite(record, answering: .immediately) { request in
                    writes.append((request.offset, request.value.count, request.isPrepared))
                    return .store
                }
            }
            return (definition, writes)
        }

        @Test(
            .needsBlueZ(
                5, 69,
                "BlueZ before 5.69 refuses a Prepare Write whose value, offset and 4-byte header pass 512 bytes (shared/gatt-server.c check_length), which a long write of 512 bytes at MTU 517 sends"
            ))
        func aLongWriteOf512BytesReachesTheServerWithItsOffsets() async throws {
            let service = BluetoothUUID.random()
            let record = CharacteristicID(.random(), service: service)
            let (definition, writes) = Self.recordingServer(service, record)
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [service]) { server, peripheral in
                    // 512 bytes at offset 0 fit one Write Request at BlueZ's MTU of 517: reliably,
                    // they are a long write (Prepare Write Requests, then Execute).
                    let value = (0..<512).map { UInt8($0 & 0xFF) }
                    try await peripheral.write(value, to: record, type: .reliable)
                    #expect(await server.value(of: record) == value)
                    #expect(try await peripheral.read(record) == value)
                    let pieces = writes.all
                    #expect(pieces.first.map { ($0.offset, $0.isPrepared) } ?? (-1, false) == (0, true))
                    let executed = pieces.filter { !$0.isPrepared }
                    #expect(executed.map(\.count).reduce(0, +) == 512)
                    #expect(executed.first?.offset == 0)
                }
            }
        }

        @Test func aReliableWriteAndAWriteAtAnOffsetReachTheServerWithTheirOffsets() async throws {
            let service = BluetoothUUID.random()
            let record = CharacteristicID(.random(), service: service)
            let (definition, writes) = Self.recordingServer(service, record)
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [service]) { server, peripheral in
                    let value = Array(repeating: UInt8(0x3C), count: 300)
                    try await peripheral.write(value, to: record, type: .reliable)
                    #expect(await server.value(of: record) == value)
                    let reliable = writes.all
                    #expect(reliable.first.map { ($0.offset, $0.isPrepared) } ?? (-1, false) == (0, true))
                    #expect(reliable.filter { !$0.isPrepared }.map(\.count).reduce(0, +) == 300)

                    let before = writes.all.count
                    try await peripheral.write([0xAA, 0xBB], to: record, offset: 298)
                    #expect(try await peripheral.read(record) == Array(value.prefix(298)) + [0xAA, 0xBB])
                    let pieces = writes.all.dropFirst(before)
                    #expect(pieces.map { $0.offset } == [298, 298])
                    #expect(pieces.map { $0.isPrepared } == [true, false])
                }
            }
        }
    }
}
