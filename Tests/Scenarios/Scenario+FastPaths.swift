import AbleCore
import Testing

/// The GATT client's fast paths (write and notification sockets) and its long and reliable
/// writes, alike on both backends.
extension Scenario {
    /// A server's characteristic that takes writes without response alone: a flood of them
    /// reaches its handler complete and unaltered, each named with its central and, where the
    /// backend can tell (the simulator), as a Write Command. A refusal stops nothing, and after a
    /// reconnection the writes come again. (On BlueZ they come as `WriteValue` calls: see
    /// `BlueZGATTApplication` for why the server offers no `AcquireWrite`.)
    static func aServerTakesWriteCommandsFromItsCentral(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let sink = CharacteristicID(.random(), service: service)
        let received = Recorder<WriteRequest>()
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(sink.uuid, properties: [.writeWithoutResponse]) }
            OnWrite(sink, answering: .immediately) { request in
                received.append(request)
                guard request.value != [0xFF] else { throw ATTError.application(0x80)! }
                return .store
            }
        }
        let central = Central(address: try #require(await backend.central.state.address))
        // BlueZ's WriteValue options name no write type.
        let kind: WriteRequest.Kind = backend.bluezVersion == nil ? .command : .request
        var packets = numberedPackets(400, length: 20, filler: 0xA5)
        packets.insert([0xFF], at: 200)
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            #expect(try await peripheral.writeWithoutResponse(packets, to: sink) == packets.count)
            try await backend.eventually("the server to receive every write") {
                received.all.count >= packets.count
            }
            // BlueZ may swap Write Commands across its EATT bearers on the air (seen on 5.66): the
            // order checked is the packets' own.
            #expect(received.all.map(\.value).inByteOrder == packets.inByteOrder)
            #expect(received.all.allSatisfy { $0.central == central && $0.kind == kind && $0.offset == 0 })

            // The central's write socket ends with the link; the writes after reconnecting come all
            // the same.
            try await peripheral.disconnect()
            try await peripheral.connect(timeout: backend.connectTimeout)
            try await peripheral.write([0xEE], to: sink, type: .withoutResponse)
            try await backend.eventually("the server to receive the write after reconnecting") {
                received.all.count >= packets.count + 1
            }
            #expect(received.all.last?.value == [0xEE])
            #expect(received.all.last?.central == central)
            #expect(received.all.last?.kind == kind)
            #expect(await server.value(of: sink) == [0xEE])
        }
    }

    static func writeWithoutResponseThroughTheSocket(_ backend: some ScenarioBackend) async throws {
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
        // More than a batch: the array goes into the socket as two slices of it.
        let count = Peripheral.writeBatchLength + 88
        let packets = numberedPackets(count, length: 18, filler: 0x5A)
        try await withConnection(backend, serving: definition, advertising: service) { _, peripheral in
            var reported: [Int] = []
            let written = try await peripheral.writeWithoutResponse(packets, to: sink) { reported.append($0) }
            #expect(written == count)
            #expect(reported == Array(1...count))
            try await backend.eventually("the server to receive every packet") { received.all.count >= count }
            // Complete and unaltered; BlueZ may swap Write Commands across its EATT bearers on
            // the air (seen on 5.66), so the order checked is the packets' own.
            #expect(Array(received.all.prefix(count)).inByteOrder == packets)

            // Longer than any ATT MTU allows: refused before anything is sent, the limit named.
            let tooLong = await #expect(throws: BluetoothError.self) {
                try await peripheral.write(Array(repeating: 1, count: 600), to: sink, type: .withoutResponse)
            }
            #expect(tooLong?.code == .valueTooLong)
            #expect(tooLong?.message.contains("MTU") == true)

            // However large the MTU (517 with BlueZ), no longer than an attribute value may be: BlueZ
            // cuts a longer socket message to 512 bytes and drops a longer Write Command.
            let characteristic = try await peripheral.characteristic(sink)
            let limit = await peripheral.maximumWriteLength(for: characteristic, type: .withoutResponse)
            let mtu = try await peripheral.mtu(of: sink) ?? 23
            #expect(limit == min(mtu - 3, 512))
            let overLimit = await #expect(throws: BluetoothError.self) {
                try await peripheral.write(Array(repeating: 2, count: limit + 1), to: sink, type: .withoutResponse)
            }
            #expect(overLimit?.code == .valueTooLong)
            // A BlueZ 5.66 server drops Write Commands of 511 and 512 bytes (its length check
            // counts the 2-byte handle) before its application sees them, whoever writes: there the
            // longest that arrives is 510 bytes.
            var longestLength = limit
            if let version = backend.bluezVersion, version < (5, 82) { longestLength = min(limit, 510) }
            let longest = [UInt8(0xFE)] + Array(repeating: 3, count: longestLength - 1)
            try await peripheral.write(longest, to: sink, type: .withoutResponse)
            try await backend.eventually("the server to receive the longest write") {
                received.all.count >= count + 1
            }
            #expect(received.all.last == longest, "the longest write without response arrived altered")

            // A write with response releases the socket (BlueZ refuses it while the socket is
            // held); the next write without response acquires it again.
            try await peripheral.write([0xAB], to: sink)
            try await peripheral.write([0xCD], to: sink, type: .withoutResponse)
            try await backend.eventually("the server to receive both writes") { received.all.count >= count + 3 }
            #expect(received.all.suffix(2) == [[0xAB], [0xCD]])

            // A socket that the link took down is acquired again after reconnecting.
            try await peripheral.disconnect()
            try await peripheral.connect(timeout: backend.connectTimeout)
            try await peripheral.write([0xEF], to: sink, type: .withoutResponse)
            try await backend.eventually("the server to receive the write after reconnecting") {
                received.all.count >= count + 4
            }
            #expect(received.all.last == [0xEF])

            // A value that does not fit ends a sequence there: the values before it are written
            // (the first batch whole, then the part of the next batch before it) and reported,
            // it and those after it are not. Once with a sequence that is not an array, batched
            // as it is iterated, once with an array, batched as slices of it.
            var before = count + 4
            for (misfitAt, asArray) in [(Peripheral.writeBatchLength + 6, false), (20, true)] {
                var sequence = (0..<(misfitAt + 30)).map { [0xB0, UInt8($0 >> 8), UInt8($0 & 0xFF)] }
                sequence[misfitAt] = Array(repeating: 0xB1, count: 600)
                let progress = Recorder<Int>()
                let misfit = await #expect(throws: BluetoothError.self) {
                    if asArray {
                        try await peripheral.writeWithoutResponse(sequence, to: sink) { progress.append($0) }
                    } else {
                        try await peripheral.writeWithoutResponse(sequence.lazy.map { $0 }, to: sink) {
                            progress.append($0)
                        }
                    }
                }
                #expect(misfit?.code == .valueTooLong)
                #expect(progress.all == Array(1...misfitAt))
                try await backend.eventually("the server to receive the values before the one that does not fit") {
                    received.all.count >= before + misfitAt
                }
                let afterMisfit = received.all.dropFirst(before)
                #expect(
                    Array(afterMisfit).inByteOrder == Array(sequence.prefix(misfitAt)),
                    "not exactly the values before the one that does not fit arrived")
                before += misfitAt
            }
        }
    }

    /// Once a write without response has acquired its characteristic's socket, the next ones go
    /// into it from the caller's thread: they do not wait behind another operation on the same
    /// peripheral, here a read that the server holds until the writes have arrived.
    static func writesWithoutResponseDoNotWaitForAReadInProgress(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let sink = CharacteristicID(.random(), service: service)
        let slow = CharacteristicID(.random(), service: service)
        let received = Recorder<[UInt8]>()
        let readStarted = Recorder<Bool>()
        let released = Recorder<Bool>()
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(sink.uuid, properties: [.write, .writeWithoutResponse])
                Characteristic(slow.uuid, properties: [.read])
            }
            OnWrite(sink, answering: .immediately) { request in
                received.append(request.value)
                return .accept
            }
            OnRead(slow) { _ in
                readStarted.append(true)
                // Held until the test has seen the writes arrive, 3 s at most (BlueZ answers for
                // an application after 5 s): writes that waited for the read leave it unreleased.
                for _ in 0..<150 where released.all.isEmpty { try? await backend.pause(.milliseconds(20)) }
                return released.all.isEmpty ? [0] : [7]
            }
        }
        try await withConnection(backend, serving: definition, advertising: service) { _, peripheral in
            // The first write acquires the socket, through the peripheral.
            try await peripheral.write([0], to: sink, type: .withoutResponse)
            try await backend.eventually("the server to receive the first write") { received.all.count == 1 }
            async let read = peripheral.read(slow)
            try await backend.eventually("the server's handler to start reading") { !readStarted.all.isEmpty }
            for index in 1...3 { try await peripheral.write([UInt8(index)], to: sink, type: .withoutResponse) }
            try await backend.eventually("the writes to arrive while the read is held") { received.all.count == 4 }
            released.append(true)
            #expect(try await read == [7], "the read was answered before the writes arrived")
            // BlueZ may swap Write Commands across its EATT bearers: the order checked is the values'.
            #expect(received.all.inByteOrder == [[0], [1], [2], [3]])
        }
    }

    /// Values that come one at a time, as a link paces them (each taken before the next is sent),
    /// then a burst: the socket's receiver turns to single reads after a few lone values and back
    /// to batches later, and every value arrives once, in order, either way.
    static func notificationsOneAtATimeThroughTheSocket(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let counter = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(counter.uuid, properties: [.read, .notify], value: [0])
            }
        }
        // More lone values than the receiver takes singly before it batches again (4 + 64).
        let oneAtATime = 80
        let burst = 20
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            let stream = try await peripheral.notifications(of: counter, delivery: .socket)
            try await backend.eventually("the server to see the subscription") {
                await server.isSubscribed(counter)
            }
            let burstValues = (oneAtATime + 1)...(oneAtATime + burst)
            do {
                // The iterator's end (at the end of this block) stops the subscription.
                var values = stream.prefix(oneAtATime + burst).makeAsyncIterator()
                for value in 1...oneAtATime {
                    try await server.notify(counter, value: [UInt8(value)])
                    #expect(try await values.next() == [UInt8(value)], "value \(value), sent alone")
                }
                for value in burstValues { try await server.notify(counter, value: [UInt8(value)]) }
                var received: [[UInt8]] = []
                while let value = try await values.next() { received.append(value) }
                #expect(received == burstValues.map { [UInt8($0)] })
            }
            try await backend.eventually("the subscription to stop") { await !server.isSubscribed(counter) }
        }
    }

    static func notificationsThroughTheSocket(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let counter = CharacteristicID(.random(), service: service)
        let indicating = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(counter.uuid, properties: [.read, .notify], value: [0])
                Characteristic(indicating.uuid, properties: [.read, .indicate], value: [0])
            }
        }
        let count = 5
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            let stream = try await peripheral.notifications(of: counter, delivery: .socket)
            try await backend.eventually("the server to see the subscription") {
                await server.isSubscribed(counter)
            }
            for value in 1...(count + 2) { try await server.notify(counter, value: [UInt8(value)]) }
            var received: [[UInt8]] = []
            for try await value in stream.prefix(count) { received.append(value) }
            #expect(received == (1...count).map { [UInt8($0)] })
            try await backend.eventually("the subscription to stop") { await !server.isSubscribed(counter) }

            // Indications stay on the bus: a socket is refused, automatic falls back.
            let refused = await #expect(throws: BluetoothError.self) {
                try await peripheral.notifications(of: indicating, delivery: .socket)
            }
            #expect(refused?.code == .notSupported)
            let indications = try await peripheral.notifications(of: indicating, delivery: .automatic)
            try await backend.eventually("the server to see the indication subscription") {
                await server.isSubscribed(indicating)
            }
            async let confirmed: Void = server.indicate(indicating, value: [42])
            var iterator = indications.makeAsyncIterator()
            #expect(try await iterator.next() == [42])
            try await confirmed

            // A stream on the socket ends with a typed error when the link goes.
            let second = try await peripheral.notifications(of: counter, delivery: .socket)
            try await backend.eventually("the server to see the second subscription") {
                await server.isSubscribed(counter)
            }
            try await peripheral.disconnect()
            let ended = await #expect(throws: BluetoothError.self) {
                for try await _ in second {}
            }
            #expect(ended?.code == .disconnected)
        }
    }

    /// `NotificationStream.forEach(_:)`, from the bus and from the socket: the values that came
    /// before it first, then every value in order, the subscription ending with the caller's
    /// task, and a typed error when the link goes.
    static func notificationsThroughAHandler(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let counter = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(counter.uuid, properties: [.read, .notify], value: [0]) }
        }
        let count = 20
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            for delivery in [NotificationDelivery.propertiesChanged, .socket] {
                let stream = try await peripheral.notifications(of: counter, delivery: delivery)
                try await backend.eventually("the server to see the subscription (\(delivery))") {
                    await server.isSubscribed(counter)
                }
                // Two values wait in the stream before the handler comes.
                try await server.notify(counter, value: [1])
                try await server.notify(counter, value: [2])
                try await backend.pause(.milliseconds(200))
                let received = Recorder<[UInt8]>()
                // Waited for without a timeout of its own: values that the simulated radio hands
                // over on real threads (the socket's) take real time, which its clock does not see.
                let allReceived = AsyncStream<Void>.makeStream()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        try await stream.forEach { value in
                            received.append(value)
                            if received.all.count >= count { allReceived.continuation.finish() }
                        }
                    }
                    for value in 3...count { try await server.notify(counter, value: [UInt8(value)]) }
                    for await _ in allReceived.stream {}
                    // Cancelling the caller's task ends the stream, and the subscription with it.
                    group.cancelAll()
                    try await group.next()
                }
                #expect(received.all == (1...count).map { [UInt8($0)] }, "through \(delivery)")
                try await backend.eventually("the subscription to stop (\(delivery))") {
                    await !server.isSubscribed(counter)
                }
            }

            // A handler's stream ends with a typed error when the link goes.
            let stream = try await peripheral.notifications(of: counter, delivery: .socket)
            try await backend.eventually("the server to see the last subscription") {
                await server.isSubscribed(counter)
            }
            let ended = await #expect(throws: BluetoothError.self) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await stream.forEach { _ in } }
                    try await peripheral.disconnect()
                    try await group.next()
                }
            }
            #expect(ended?.code == .disconnected)
        }
    }

    static func longAndReliableWrites(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let record = CharacteristicID(.random(), service: service)
        let guarded = CharacteristicID(.random(), service: service)
        let writes = Recorder<(offset: Int, count: Int, isPrepared: Bool)>()
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(
                    record.uuid, properties: [.read, .write],
                    permissions: [.readable, .writable, .authorizePreparedWrites])
                Characteristic(
                    guarded.uuid, properties: [.read, .write],
                    permissions: [.readable, .writable, .authorizePreparedWrites])
            }
            OnWrite(record, answering: .immediately) { request in
                writes.append((request.offset, request.value.count, request.isPrepared))
                return .store
            }
            OnWrite(guarded, answering: .immediately) { request in
                guard !request.isPrepared else { throw ATTError.insufficientAuthorization }
                return .store
            }
        }
        try await withConnection(backend, serving: definition, advertising: service) { _, peripheral in
            // 300 bytes: BlueZ before 5.69 refuses a prepared piece that with its offset and 4-byte
            // header passes 512 bytes, and at MTU 517 one piece carries up to 512.
            let value = (0..<300).map { UInt8($0 & 0xFF) }
            try await peripheral.write(value, to: record, type: .reliable)
            #expect(try await peripheral.read(record) == value)
            let reliable = writes.all
            // The server is asked once to authorize the prepared write, then sees every piece.
            #expect(reliable.first.map { ($0.offset, $0.isPrepared) } ?? (-1, false) == (0, true))
            let executed = reliable.filter { !$0.isPrepared }
            #expect(reliable.count == executed.count + 1)
            #expect(executed.map(\.count).reduce(0, +) == 300)
            #expect(
                executed.map(\.offset) == executed.indices.map { index in executed[..<index].map(\.count).reduce(0, +) }
            )

            // A write at an offset is a long write: its piece arrives at that offset.
            try await peripheral.write([0xAA, 0xBB], to: record, offset: 298)
            #expect(try await peripheral.read(record) == Array(value.prefix(298)) + [0xAA, 0xBB])
            #expect(writes.all.last.map { ($0.offset, $0.count, $0.isPrepared) } ?? (0, 0, true) == (298, 2, false))

            // A handler that refuses the prepared write refuses it whole, with its ATT error.
            let refused = await #expect(throws: BluetoothError.self) {
                try await peripheral.write(value, to: guarded, type: .reliable)
            }
            #expect(refused?.code == .notAuthorized)
            #expect(try await peripheral.read(guarded) == [])
        }
    }
}

extension Scenario {
    /// `count` values of `length` bytes, each numbered in its first two (big-endian) and filled
    /// with `filler`: in byte order they are in the order they were made, whatever order they
    /// arrived in.
    static func numberedPackets(_ count: Int, length: Int, filler: UInt8) -> [[UInt8]] {
        (0..<count).map { index in
            [UInt8(index >> 8), UInt8(index & 0xFF)] + Array(repeating: filler, count: length - 2)
        }
    }
}

extension Array where Element == [UInt8] {
    /// The values sorted by their bytes: how the scenarios compare what arrived with what was
    /// sent where BlueZ may swap Write Commands across its EATT bearers on the air.
    var inByteOrder: [[UInt8]] { sorted { $0.lexicographicallyPrecedes($1) } }
}
