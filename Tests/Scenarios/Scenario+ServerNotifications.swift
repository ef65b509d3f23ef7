import AbleCore
import Foundation
import Testing

/// A GATT server's notifications: paced so that requests keep being answered, and sent to one
/// central where the backend can.
extension Scenario {
    /// The issue's test: the server notifies in a tight loop while the central reads and writes
    /// 50 times; every request succeeds within 1 s, memory stays bounded, and the central
    /// receives the notifications in order, none lost.
    static func aServerNotifyingInATightLoopKeepsAnswering(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let counter = CharacteristicID(.random(), service: service)
        let setting = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(counter.uuid, properties: [.read, .notify], value: [0, 0, 0, 0])
                Characteristic(setting.uuid, properties: [.read, .write], value: [0])
            }
        }
        try await withConnection(backend, serving: definition, advertising: service, pacing: backend.serverPacing) {
            server, peripheral in
            let stream = try await peripheral.notifications(of: counter)
            try await backend.eventually("the server to see the subscription") {
                await server.isSubscribed(counter)
            }
            let received = Recorder<UInt32>()
            let sent = Recorder<UInt32>()
            var latencies: [Duration] = []
            var memory: [MemorySample] = []
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await value in stream { received.append(UInt32(littleEndianBytes: value)) }
                }
                group.addTask {
                    var number: UInt32 = 0
                    do {
                        while !Task.isCancelled {
                            number += 1
                            try await server.notify(counter, value: number.littleEndianBytes)
                            sent.append(number)
                        }
                    } catch is CancellationError {}
                }
                let clock = ContinuousClock()
                for round in 1...50 {
                    var start = clock.now
                    let read = try await peripheral.read(setting)
                    latencies.append(start.duration(to: clock.now))
                    #expect(read == [UInt8(round - 1)])
                    start = clock.now
                    try await peripheral.write([UInt8(round)], to: setting)
                    latencies.append(start.duration(to: clock.now))
                    if round % 10 == 0 { memory.append(MemorySample.now()) }
                    // A central that asks every 100 ms or so, as an app would.
                    try await backend.pause(.milliseconds(100))
                }
                #expect(await server.value(of: setting) == [50])
                // The server kept notifying all along.
                #expect(received.all.count >= 50, "the central received \(received.all.count) notifications")
                group.cancelAll()
                try await group.next()
                try await group.next()
            }
            #expect(latencies.count == 100)
            let slowest = latencies.max() ?? .zero
            #expect(slowest < .seconds(1), "the slowest request took \(slowest)")
            print(
                "tight loop: \(sent.all.count) notified, \(received.all.count) received, slowest request \(slowest),"
                    + " median \(latencies.sorted()[latencies.count / 2]), memory \(memory)")
            let values = received.all
            #expect(zip(values, values.dropFirst()).allSatisfy { $1 == $0 + 1 }, "out of order or lost: \(values)")
            #expect(values.first == 1)
            #expect(stream.droppedCount == 0)
            // Bounded: after the first ten rounds, neither this process nor bluetoothd grows by
            // more than a few megabytes however many notifications the loop produced. (This
            // process's memory is the scenario's only where nothing else runs in it: on the host
            // the whole suite's tests come and go meanwhile, and it grew by 16 MB in one CI run.)
            if let first = memory.first, let last = memory.last {
                if backend.hasItsProcessToItself {
                    #expect(last.ownKilobytes - first.ownKilobytes < 8_192, "\(memory)")
                }
                if let start = first.bluetoothdKilobytes, let end = last.bluetoothdKilobytes {
                    #expect(end - start < 2_048, "bluetoothd grew: \(memory)")
                }
            }
        }
    }

    /// Notifying one central: it receives the value, where the backend can do it; elsewhere the
    /// server refuses rather than notify everyone.
    static func notifyingOneCentral(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let level = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(level.uuid, properties: [.read, .notify], value: [0]) }
        }
        let centralAddress = try #require(await backend.central.state.address)
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            let stream = try await peripheral.notifications(of: level)
            try await backend.eventually("the server to see the subscription") {
                await server.isSubscribed(level)
            }
            let central = Central(address: centralAddress)
            guard backend.notifiesOneCentral else {
                let refused = await #expect(throws: BluetoothError.self) {
                    try await server.notify(level, value: [1], to: central)
                }
                #expect(refused?.code == .unsupported)
                #expect(refused?.message.contains("5.76") == true, "\(refused?.message ?? "")")
                return
            }
            #expect(await server.subscribers(of: level) == [central])
            for value in 1...3 { try await server.notify(level, value: [UInt8(value)], to: central) }
            var received: [[UInt8]] = []
            for try await value in stream.prefix(3) { received.append(value) }
            #expect(received == [[1], [2], [3]])
        }
    }
}

extension Scenario {
    /// Indications to every subscriber and to one central: each returns once confirmed, where the
    /// backend can name the central; elsewhere indicating one central is refused.
    static func indicatingEveryCentralOrOne(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let status = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(status.uuid, properties: [.read, .indicate], value: [0]) }
        }
        let centralAddress = try #require(await backend.central.state.address)
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            let stream = try await peripheral.notifications(of: status)
            try await backend.eventually("the server to see the subscription") {
                await server.isSubscribed(status)
            }
            let central = Central(address: centralAddress)
            try await server.indicate(status, value: [1], timeout: .seconds(10))
            if backend.indicatesOneCentral {
                #expect(await server.subscribers(of: status) == [central])
                try await server.indicate(status, value: [2], to: central, timeout: .seconds(10))
            } else {
                let refused = await #expect(throws: BluetoothError.self) {
                    try await server.indicate(status, value: [2], to: central, timeout: .seconds(10))
                }
                #expect(refused?.code == .unsupported)
                #expect(refused?.message.contains("5.80") == true, "\(refused?.message ?? "")")
                try await server.indicate(status, value: [2], timeout: .seconds(10))
            }
            var received: [[UInt8]] = []
            for try await value in stream.prefix(2) { received.append(value) }
            #expect(received == [[1], [2]])
        }
    }
}

extension Scenario {
    /// A server hears nothing of a link its own adapter opens as a central, and closing it with
    /// ``AutoManageDevices`` leaves that link up.
    static func connectionEventsAreAboutTheServersCentrals(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let otherService = BluetoothUUID.random()
        let events = Recorder<Bool>()
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(.random(), properties: [.read], value: [1]) }
            OnConnectionStateChange { _, _, isConnected in events.append(isConnected) }
            AutoManageDevices()
        }
        let server = try await GATTServer.start(on: backend.peripheral, definition: definition)
        let other = try await GATTServer.start(on: backend.central) {
            Service(otherService) { Characteristic(.random(), properties: [.read], value: [2]) }
        }
        try await withCleanup {
            // The server's adapter connects, as a central, to a server on the other adapter.
            let scan = try await backend.peripheral.scan(ScanFilter(serviceUUIDs: [otherService]))
            let advertising = try await backend.central.startAdvertising(
                Advertisement(localName: "out", serviceUUIDs: [otherService]))
            let outgoing = try await withCleanup {
                let found = try await scan.first(timeout: backend.discoveryTimeout)
                let outgoing = backend.peripheral.peripheral(for: found)
                try await outgoing.connect(timeout: backend.connectTimeout)
                return outgoing
            } cleanup: {
                await advertising.stop()
            }
            try await backend.pause(.seconds(1))
            #expect(events.all == [])
            #expect(await server.connectedCentrals == [])
            await server.close()
            #expect(await outgoing.isConnected)
            try await outgoing.disconnect()
        } cleanup: {
            await server.close()
            await other.close()
        }
    }
}

/// The resident memory of this process and, where one runs on this machine, of `bluetoothd`.
struct MemorySample: Sendable, CustomStringConvertible {
    var ownKilobytes: Int
    var bluetoothdKilobytes: Int?

    static func now() -> MemorySample {
        MemorySample(ownKilobytes: residentKilobytes(of: "self") ?? 0, bluetoothdKilobytes: bluetoothd())
    }

    var description: String { "\(ownKilobytes) kB" + (bluetoothdKilobytes.map { " (bluetoothd \($0) kB)" } ?? "") }

    private static func residentKilobytes(of process: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(process)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "")
        }
        return nil
    }

    private static func bluetoothd() -> Int? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        for entry in entries where entry.allSatisfy(\.isNumber) {
            let name = try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8)
            if name?.trimmingCharacters(in: .whitespacesAndNewlines) == "bluetoothd" {
                return residentKilobytes(of: entry)
            }
        }
        return nil
    }
}

extension UInt32 {
    init(littleEndianBytes bytes: [UInt8]) {
        self = bytes.prefix(4).enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * $1.offset) }
    }

    var littleEndianBytes: [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: self >> (8 * $0)) } }
}

extension Scenario {
    /// Two services holding characteristics of one UUID stay apart through the server's typed
    /// methods; the server tells the longest value its central can receive, sends a value that
    /// long whole, and refuses a longer one, to that central and to every subscriber, sending
    /// nothing.
    static func aServerKeepsItsValuesWithinWhatTheCentralReceives(_ backend: some ScenarioBackend) async throws {
        let serviceA = BluetoothUUID.random()
        let serviceB = BluetoothUUID.random()
        let shared = BluetoothUUID.random()
        let inA = CharacteristicID(shared, service: serviceA)
        let inB = CharacteristicID(shared, service: serviceB)
        let definition = GATTServerDefinition {
            Service(serviceA) { Characteristic(shared, properties: [.read, .notify], value: [0xA]) }
            Service(serviceB) { Characteristic(shared, properties: [.read, .write], value: [0xB]) }
        }
        let centralAddress = try #require(await backend.central.state.address)
        try await withConnection(backend, serving: definition, advertising: serviceA) { server, peripheral in
            let central = Central(address: centralAddress)
            #expect(try await peripheral.read(inA) == [0xA])
            #expect(try await peripheral.read(inB) == [0xB])
            try await server.setValue([0xBB], of: inB)
            #expect(try await peripheral.read(inB) == [0xBB])
            try await peripheral.write([0xB2], to: inB)
            #expect(await server.value(of: inB) == [0xB2])
            #expect(await server.value(of: inA) == [0xA])

            let stream = try await peripheral.notifications(of: inA)
            try await backend.eventually("the server to see the subscription") { await server.isSubscribed(inA) }
            #expect(await !server.isSubscribed(inB))
            // Known: the central has read (BlueZ passes the link's MTU with each request).
            let limit = try #require(await server.maximumValueLength(for: central))
            #expect((20...512).contains(limit))

            let tooLong = [UInt8](repeating: 0xEE, count: limit + 1)
            let refused = await #expect(throws: BluetoothError.self) { try await server.notify(inA, value: tooLong) }
            #expect(refused?.code == .valueTooLong)
            #expect(refused?.message.contains("\(limit + 1) bytes") == true, "\(refused?.message ?? "")")
            // At the attribute limit itself (a link whose MTU carries 512 bytes and more), the value
            // is refused as too long for any attribute before any link is asked.
            let reason = limit < 512 ? "can receive \(limit)" : "512-byte attribute limit"
            #expect(refused?.message.contains(reason) == true, "\(refused?.message ?? "")")
            let refusedToOne = await #expect(throws: BluetoothError.self) {
                try await server.notify(inA, value: tooLong, to: central)
            }
            #expect(refusedToOne?.code == .valueTooLong)
            #expect(await server.value(of: inA) == [0xA], "a refused value is not stored")

            let longest = (0..<limit).map { UInt8(truncatingIfNeeded: $0) }
            try await server.notify(inA, value: longest)
            try await server.notify(inA, value: [1])
            var received: [[UInt8]] = []
            for try await value in stream.prefix(2) { received.append(value) }
            #expect(received == [longest, [1]], "nothing of the refused values arrived, nothing was cut")
        }
    }
}
