import Able
import AbleDBus
import AbleTestSupport
import Foundation
import Testing

@testable import AbleBlueZ

/// A gateway with many devices against the system bus's limits, which the private bus keeps:
/// 128 calls awaiting replies and 512 match rules per connection.
@Suite(.timeLimit(.minutes(1)))
struct SystemBusLimitsTests {
    static let service = BluetoothUUID(uuid16: 0xFEED)

    static func characteristic(_ index: Int) -> BluetoothUUID {
        BluetoothUUID(uuid128: (UInt128(0xABCD_0000) + UInt128(index)) << 96 | 0x0000_1000_8000_0080_5F9B_34FB)
    }

    /// Connects `count` fake devices on hci0, each with one service of `characteristics`
    /// characteristics that read and notify their index.
    func withDevices(
        _ count: Int, characteristics: Int,
        _ body: (BlueZSystem, [(FakeDevice, Peripheral)]) async throws -> Void
    ) async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let adapter = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci0", system: system))
        var devices: [(FakeDevice, Peripheral)] = []
        for index in 0..<count {
            let address = String(format: "00:11:22:33:44:%02X", index)
            let device = try await fake.addConnectableDevice(
                address,
                services: [
                    FakeDevice.Service(
                        uuid: Self.service.description,
                        characteristics: (0..<characteristics).map {
                            .init(
                                uuid: Self.characteristic($0).description, flags: ["read", "notify"],
                                value: [UInt8(index), UInt8($0)])
                        })
                ])
            let peripheral = adapter.peripheral(address: BluetoothAddress(address)!)
            try await peripheral.connect(timeout: .safetyNet)
            devices.append((device, peripheral))
        }
        try await body(system, devices)
    }

    /// A peripheral makes one request at a time (ATT does), so the reads are across 200 devices.
    @Test func twoHundredConcurrentReadsAcrossDevicesAllSucceed() async throws {
        try await withDevices(200, characteristics: 1) { system, devices in
            for (device, _) in devices { device.readHangs.value = true }
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for (index, (_, peripheral)) in devices.enumerated() {
                    group.addTask {
                        let value = try await peripheral.read(
                            CharacteristicID(Self.characteristic(0), service: Self.service))
                        return value == [UInt8(index), 0]
                    }
                }
                // As many reads as the connection lets await replies reach BlueZ; the others wait
                // their turn in Able, where the bus would have refused them (LimitsExceeded).
                try await waitUntil { devices.map { $0.0.readsWaiting.value }.reduce(0, +) == 100 }
                try await waitUntil { await system.connection.callCounts == (outstanding: 100, waiting: 100) }
                for (device, _) in devices { device.readHangs.value = false }
                var correct = 0
                for try await isCorrect in group where isCorrect { correct += 1 }
                #expect(correct == 200)
            }
            #expect(await system.connection.callCounts == (outstanding: 0, waiting: 0))
        }
    }

    @Test func sixHundredSubscriptionsOnOneConnectionAllSucceedAndDeliver() async throws {
        try await withDevices(10, characteristics: 60) { system, devices in
            let streams = try await withThrowingTaskGroup(of: (Int, Int, NotificationStream).self) { group in
                for (index, (_, peripheral)) in devices.enumerated() {
                    for characteristic in 0..<60 {
                        group.addTask {
                            let id = CharacteristicID(Self.characteristic(characteristic), service: Self.service)
                            return (index, characteristic, try await peripheral.notifications(of: id))
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(streams.count == 600)
            #expect(
                devices.map { $0.0.calls.value.filter { $0.hasPrefix("StartNotify") }.count }
                    == Array(repeating: 60, count: 10))
            let rules = try await system.connection.daemonMatchRuleCount()
            #expect(rules < 512)
            #expect(rules <= 4)
            for (index, characteristic, _) in streams {
                devices[index].0.notify(0, characteristic, [UInt8(index), UInt8(characteristic), 1])
            }
            for (index, characteristic, stream) in streams {
                var values = stream.makeAsyncIterator()
                #expect(try await values.next() == [UInt8(index), UInt8(characteristic), 1])
            }
        }
    }
}

extension DBusConnection {
    /// How many match rules the bus daemon holds for this connection (`Debug.Stats`).
    func daemonMatchRuleCount() async throws -> UInt32 {
        let reply = try await call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus.Debug.Stats", method: "GetConnectionStats",
            arguments: [.string(uniqueName)])
        let stats = try reply[0].decode([String: DBusVariant].self)
        return try stats.decode("MatchRules", as: UInt32.self) ?? 0
    }
}
