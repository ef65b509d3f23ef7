import Able
import AbleDBus
import AbleTestSupport
import Foundation
import Testing

@testable import AbleBlueZ

@Suite(.timeLimit(.minutes(1)))
struct GATTServerTests {
    static let service: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
    static let psm: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A52553A"
    static let stored: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525500"
    static let writeOnly: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525501"
    static let other: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525502"

    /// The characteristic `uuid` of ``service``, as a handler names it.
    static func id(_ uuid: BluetoothUUID) -> CharacteristicID { CharacteristicID(uuid, service: service) }

    /// The seed's server: a PSM characteristic answered by a handler, plus stored and catch-all ones.
    static func definition(events: Locked<[String]>) -> GATTServerDefinition {
        GATTServerDefinition {
            Service(service) {
                Characteristic(psm, properties: [.read, .indicate, .notify]) {
                    Descriptor(
                        .characteristicUserDescription, permissions: [.readable, .writable], value: Array("PSM".utf8))
                }
                Characteristic(stored, properties: [.read, .write], value: [1, 2, 3])
                Characteristic(writeOnly, properties: [.write])
                Characteristic(other, properties: [.read, .write])
            }
            OnRead(id(psm), answering: .immediately) { request in
                events.value.append("read psm at \(request.offset)")
                return [0x80, 0x00]
            }
            OnRead(.anyCharacteristic, answering: .immediately) { request in
                guard request.uuid == other else { return Array(request.storedValue.dropFirst(request.offset)) }
                throw ATTError.application(0x80)!
            }
            OnWrite(.anyCharacteristic, answering: .immediately) { request in
                events.value.append("write \(request.value)")
                return request.uuid == other ? .accept : .store
            }
            OnWrite(DescriptorID(.characteristicUserDescription, characteristic: id(psm)), answering: .immediately) {
                request in
                events.value.append("descriptor \(request.value)")
                return .store
            }
            OnStateChange { _, isOpen in events.value.append("open \(isOpen)") }
            OnSubscriptionChange { _, _, uuid, subscribed in events.value.append("subscribed \(subscribed)") }
        }
    }

    struct Fixture {
        let bus: PrivateBus
        let fake: FakeBlueZ
        let adapter: Adapter
        let events: Locked<[String]>
    }

    func withServer(
        _ definition: (Locked<[String]>) -> GATTServerDefinition = Self.definition(events:),
        _ body: (Fixture, GATTServer) async throws -> Void
    ) async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let adapter = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci1", system: system))
        let events = Locked<[String]>([])
        let server = try await GATTServer.start(on: adapter, definition: definition(events))
        try await body(Fixture(bus: bus, fake: fake, adapter: adapter, events: events), server)
        await server.close()
    }

    /// The path BlueZ sees for the characteristic with `uuid`.
    func path(_ fake: FakeBlueZ, _ uuid: BluetoothUUID, interface: String = "org.bluez.GattCharacteristic1") throws
        -> DBusObjectPath
    {
        let objects = try #require(fake.application.value?.objects)
        return try #require(
            objects.first { (try? $0.value[interface]?.decode("UUID", as: String.self)) == uuid.uuidString }?.key)
    }

    func call(
        _ fixture: Fixture, _ uuid: BluetoothUUID, _ method: String, _ arguments: [DBusValue], descriptor: Bool = false
    )
        async throws -> [DBusValue]
    {
        let interface = descriptor ? "org.bluez.GattDescriptor1" : "org.bluez.GattCharacteristic1"
        let application = try #require(fixture.fake.application.value)
        return try await fixture.fake.connection.call(
            destination: application.owner, path: try path(fixture.fake, uuid, interface: interface),
            interface: interface,
            method: method, arguments: arguments)
    }

    static func options(_ entries: [String: DBusValue] = [:]) -> DBusValue {
        .dictionary(
            key: .string, value: .variant,
            entries.map { DBusDictionaryEntry(key: .string($0.key), value: .variant($0.value)) })
    }

    @Test func aServerCancelledBeforeBlueZAnswersIsUnregistered() async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let adapter = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci1", system: system))
        fake.replyDelay.value = .seconds(2)
        let starting = Task { try await GATTServer.start(on: adapter, definition: Self.definition(events: Locked([]))) }
        try await waitUntil { fake.application.value != nil }
        starting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await starting.value }
        #expect(fake.application.value == nil)
    }

    @Test func theApplicationIsRegisteredWithItsObjectsAndFlags() async throws {
        try await withServer { fixture, server in
            let objects = try #require(fixture.fake.application.value?.objects)
            #expect(objects.count == 6)  // a service, four characteristics, a descriptor
            let psm = try #require(objects[try path(fixture.fake, Self.psm)]?["org.bluez.GattCharacteristic1"])
            #expect(Set(try #require(try psm.decode("Flags", as: [String].self))) == ["read", "indicate", "notify"])
            #expect(fixture.events.value.contains("open true"))
            #expect(await server.isOpen)
        }
    }

    @Test func readsAreAnsweredByHandlersAndStoredValues() async throws {
        try await withServer { fixture, _ in
            let psm = try await call(
                fixture, Self.psm, "ReadValue",
                [Self.options(["offset": .uint16(0), "device": .objectPath("/org/bluez/hci1/dev_00_AA_01_00_00_00")])])
            #expect(psm == [.bytes([0x80, 0x00])])
            #expect(
                try await call(fixture, Self.stored, "ReadValue", [Self.options(["offset": .uint16(1)])]) == [
                    .bytes([2, 3])
                ])
            let descriptor = try await call(
                fixture, .characteristicUserDescription, "ReadValue", [Self.options()], descriptor: true)
            #expect(descriptor == [.bytes(Array("PSM".utf8))])
            #expect(fixture.events.value.contains("read psm at 0"))
        }
    }

    @Test func writesAreStoredOrKeptByTheHandler() async throws {
        try await withServer { fixture, server in
            _ = try await call(
                fixture, Self.stored, "WriteValue", [.bytes([9, 9]), Self.options(["offset": .uint16(1)])])
            #expect(await server.value(of: CharacteristicID(Self.stored, service: Self.service)) == [1, 9, 9])
            _ = try await call(fixture, Self.other, "WriteValue", [.bytes([7]), Self.options()])
            #expect(await server.value(of: CharacteristicID(Self.other, service: Self.service)) == [])
            _ = try await call(
                fixture, .characteristicUserDescription, "WriteValue", [.bytes([1]), Self.options()], descriptor: true)
            #expect(fixture.events.value.contains("write [9, 9]"))
            #expect(fixture.events.value.contains("descriptor [1]"))
        }
    }

    @Test func badRequestsGetTheProperATTError() async throws {
        let cases: [(String, BluetoothUUID, [DBusValue], ATTError)] = [
            ("ReadValue", Self.writeOnly, [], .readNotPermitted),
            ("WriteValue", Self.psm, [.bytes([1])], .writeNotPermitted),
            ("WriteValue", Self.stored, [.bytes(Array(repeating: 0, count: 513))], .invalidAttributeValueLength),
            ("ReadValue", Self.other, [], ATTError.application(0x80)!),
        ]
        try await withServer { fixture, _ in
            for (method, uuid, value, expected) in cases {
                print("case", method, uuid)
                let error = await #expect(throws: DBusError.self) {
                    try await call(fixture, uuid, method, value + [Self.options()])
                }
                #expect(error?.name.rawValue == expected.bluezReply.name, "\(method) \(uuid)")
                #expect(error?.message == expected.bluezReply.message, "\(method) \(uuid)")
            }
        }
    }

    /// Disconnecting a central answers its request at once, through the D-Bus reply, while the
    /// handler still runs; the handler is cancelled, and the `.store` it returns afterwards stores
    /// nothing.
    @Test func disconnectingACentralAnswersItsRunningRequestAndIgnoresItsHandler() async throws {
        let slow: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525503"
        let central = Central(address: "11:22:33:44:55:66")
        let definition = { (events: Locked<[String]>) in
            GATTServerDefinition {
                Service(Self.service) { Characteristic(slow, properties: [.read, .write], value: [1]) }
                OnWrite(Self.id(slow)) { request in
                    events.value.append("started by \(request.central?.address.description ?? "nobody")")
                    while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                    events.value.append("cancelled")
                    return .store
                }
            }
        }
        try await withServer(definition) { fixture, server in
            let connection = fixture.fake.connection
            let owner = try #require(fixture.fake.application.value?.owner)
            let path = try path(fixture.fake, slow)
            let device = DBusValue.objectPath("/org/bluez/hci1/dev_11_22_33_44_55_66")
            let write = Task {
                try await connection.call(
                    destination: owner, path: path, interface: "org.bluez.GattCharacteristic1", method: "WriteValue",
                    arguments: [.bytes([7]), Self.options(["device": device])])
            }
            try await waitUntil { fixture.events.value.contains("started by 11:22:33:44:55:66") }
            // The fake's Device1 has no Disconnect: the requests are answered before it is called.
            _ = try? await server.disconnect(central)
            let error = await #expect(throws: DBusError.self) { try await write.value }
            #expect(error?.name.rawValue == ATTError.unlikelyError.bluezReply.name)
            try await waitUntil { fixture.events.value.contains("cancelled") }
            #expect(try await call(fixture, slow, "ReadValue", [Self.options()]) == [.bytes([1])])
        }
    }

    /// A handler declared `answering: .immediately` is answered on the connection's loop as the
    /// request arrives, outside any task; one declared without it runs in a task. Both are refused and checked alike.
    @Test func handlersThatCannotSuspendAreAnsweredWithoutATask() async throws {
        let immediate: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525504"
        let suspending: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525505"
        let tooLong: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525506"
        let description = BluetoothUUID.characteristicUserDescription
        let definition = { (events: Locked<[String]>) in
            GATTServerDefinition {
                Service(Self.service) {
                    Characteristic(immediate, properties: [.read, .write]) {
                        Descriptor(description, permissions: [.readable, .writable])
                    }
                    Characteristic(suspending, properties: [.read, .write])
                    Characteristic(tooLong, properties: [.read, .write])
                }
                OnRead(Self.id(immediate), answering: .immediately) { request in
                    events.value.append("read \(request.offset) in a task: \(withUnsafeCurrentTask { $0 != nil })")
                    return [1]
                }
                OnWrite(Self.id(immediate), answering: .immediately) { request in
                    events.value.append("write \(request.value) in a task: \(withUnsafeCurrentTask { $0 != nil })")
                    guard request.value != [0xFF] else { throw ATTError.application(0x81)! }
                    return .store
                }
                OnRead(DescriptorID(description, characteristic: Self.id(immediate)), answering: .immediately) { _ in
                    events.value.append("descriptor read in a task: \(withUnsafeCurrentTask { $0 != nil })")
                    return [2]
                }
                OnWrite(DescriptorID(description, characteristic: Self.id(immediate)), answering: .immediately) { _ in
                    events.value.append("descriptor write in a task: \(withUnsafeCurrentTask { $0 != nil })")
                    return .accept
                }
                OnRead(Self.id(suspending)) { _ in
                    events.value.append("suspending read in a task: \(withUnsafeCurrentTask { $0 != nil })")
                    await Task.yield()
                    return [3]
                }
                OnRead(.anyCharacteristic, answering: .immediately) { _ in Array(repeating: 0, count: 513) }
                OnWrite(.anyCharacteristic, answering: .immediately) { _ in throw CancellationError() }
            }
        }
        try await withServer(definition) { fixture, server in
            #expect(
                try await call(fixture, immediate, "ReadValue", [Self.options(["offset": .uint16(0)])]) == [.bytes([1])]
            )
            _ = try await call(fixture, immediate, "WriteValue", [.bytes([4, 5]), Self.options()])
            #expect(await server.value(of: CharacteristicID(immediate, service: Self.service)) == [4, 5])
            let refused = await #expect(throws: DBusError.self) {
                try await call(fixture, immediate, "WriteValue", [.bytes([0xFF]), Self.options()])
            }
            #expect(refused?.name.rawValue == ATTError.application(0x81)!.bluezReply.name)
            #expect(refused?.message == ATTError.application(0x81)!.bluezReply.message)
            #expect(await server.value(of: CharacteristicID(immediate, service: Self.service)) == [4, 5])
            #expect(
                try await call(fixture, description, "ReadValue", [Self.options()], descriptor: true) == [.bytes([2])])
            _ = try await call(fixture, description, "WriteValue", [.bytes([6]), Self.options()], descriptor: true)
            #expect(try await call(fixture, suspending, "ReadValue", [Self.options()]) == [.bytes([3])])
            #expect(
                fixture.events.value.filter { $0.contains("in a task") } == [
                    "read 0 in a task: false", "write [4, 5] in a task: false", "write [255] in a task: false",
                    "descriptor read in a task: false", "descriptor write in a task: false",
                    "suspending read in a task: true",
                ])

            let long = await #expect(throws: DBusError.self) {
                try await call(fixture, tooLong, "ReadValue", [Self.options()])
            }
            #expect(long?.name.rawValue == ATTError.invalidAttributeValueLength.bluezReply.name)
            let failed = await #expect(throws: DBusError.self) {
                try await call(fixture, tooLong, "WriteValue", [.bytes([1]), Self.options()])
            }
            #expect(failed?.name.rawValue == ATTError.unlikelyError.bluezReply.name)
            #expect(failed?.message == ATTError.unlikelyError.bluezReply.message)
            #expect(await server.value(of: CharacteristicID(tooLong, service: Self.service)) == [])
        }
    }

    @Test func aBadOffsetIsRefused() async throws {
        try await withServer { fixture, _ in
            let error = await #expect(throws: DBusError.self) {
                try await call(
                    fixture, Self.stored, "WriteValue", [.bytes([1]), Self.options(["offset": .uint16(10)])])
            }
            #expect(error?.name.rawValue == ATTError.invalidOffset.bluezReply.name)
        }
    }

    @Test func notifyingChangesTheValueBlueZSeesAndSubscriptionsAreReported() async throws {
        try await withServer { fixture, server in
            let changes = try await fixture.fake.connection.signals(
                matching: DBusMatchRule(
                    path: try path(fixture.fake, Self.psm), interface: "org.freedesktop.DBus.Properties"))
            _ = try await call(fixture, Self.psm, "StartNotify", [])
            try await waitUntil { await server.isSubscribed(CharacteristicID(Self.psm, service: Self.service)) }
            try await server.notify(CharacteristicID(Self.psm, service: Self.service), value: [0x81, 0x00])
            for try await signal in changes {
                let changed = try signal.arguments[1].decode([String: DBusVariant].self)
                #expect(try changed.decode("Value", as: [UInt8].self) == [0x81, 0x00])
                break
            }
            _ = try await call(fixture, Self.psm, "StopNotify", [])
            try await waitUntil { fixture.events.value.contains("subscribed false") }
            let error = await #expect(throws: BluetoothError.self) {
                try await server.notify(CharacteristicID(Self.stored, service: Self.service), value: [1])
            }
            #expect(error?.code == .notSupported)
        }
    }

    @Test func theServerLearnsACentralsMTUFromBlueZsRequestsAndRefusesWhatItsSocketCannotCarry() async throws {
        let level: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525510"
        let levelID = CharacteristicID(level, service: Self.service)
        let definition: (Locked<[String]>) -> GATTServerDefinition = { _ in
            GATTServerDefinition {
                Service(Self.service) {
                    Characteristic(Self.stored, properties: [.read], value: [1])
                    Characteristic(level, properties: [.read, .notify])
                }
            }
        }
        try await withServer(definition) { fixture, server in
            let central = Central(address: BluetoothAddress("00:AA:01:00:00:00"))
            let device = DBusValue.objectPath(DBusObjectPath("/org/bluez/hci1/dev_00_AA_01_00_00_00"))
            #expect(await server.maximumValueLength(for: central) == nil, "nothing said yet")
            _ = try await call(
                fixture, Self.stored, "ReadValue", [Self.options(["device": device, "mtu": .uint16(100)])])
            #expect(await server.maximumValueLength(for: central) == 97)

            // The subscription's own MTU (this fake names no version: one socket for every subscriber).
            let reply = try await call(
                fixture, level, "AcquireNotify", [Self.options(["device": device, "mtu": .uint16(50)])])
            guard case .unixFD(let theirs) = reply.first else {
                Issue.record("AcquireNotify answered \(reply)")
                return
            }
            let socket = try #require(theirs.take())
            defer { _ = close(socket) }
            try await waitUntil { await server.isSubscribed(levelID) }
            #expect(await server.maximumValueLength(for: central) == 47)

            let toAll = await #expect(throws: BluetoothError.self) {
                try await server.notify(levelID, value: Array(repeating: 1, count: 48))
            }
            #expect(toAll?.code == .valueTooLong)
            #expect(toAll?.message.contains("48 bytes") == true, "\(toAll?.message ?? "")")
            #expect(toAll?.message.contains("can receive 47") == true, "\(toAll?.message ?? "")")
            let toOne = await #expect(throws: BluetoothError.self) {
                try await server.notify(levelID, value: Array(repeating: 2, count: 48), to: central)
            }
            #expect(toOne?.code == .valueTooLong)
            #expect(toOne?.message.contains("\(central) can receive 47") == true, "\(toOne?.message ?? "")")
            #expect(await server.value(of: levelID) == [], "a refused value is not stored")

            // What fits goes into the socket whole, and is the first thing there.
            try await server.notify(levelID, value: Array(repeating: 3, count: 47))
            var buffer = [UInt8](repeating: 0, count: 600)
            let count = buffer.withUnsafeMutableBytes { read(socket, $0.baseAddress, $0.count) }
            #expect(Array(buffer.prefix(max(count, 0))) == Array(repeating: 3, count: 47))
        }
    }

    @Test func anIndicationWaitsForItsConfirmation() async throws {
        try await withServer { fixture, server in
            let confirmed = Locked(false)
            let indication = Task {
                try await server.indicate(
                    CharacteristicID(Self.psm, service: Self.service), value: [5], timeout: .safetyNet)
                confirmed.value = true
            }
            try await Task.sleep(for: .milliseconds(100))
            #expect(!confirmed.value)
            _ = try await call(fixture, Self.psm, "Confirm", [])
            try await indication.value
            #expect(confirmed.value)
            let timeout = await #expect(throws: BluetoothError.self) {
                try await server.indicate(
                    CharacteristicID(Self.psm, service: Self.service), value: [6], timeout: .milliseconds(100))
            }
            #expect(timeout?.code == .timeout)
        }
    }

    @Test func anotherProcessCallingTheServerIsRefusedAndChangesNothing() async throws {
        try await withServer { fixture, server in
            let stranger = try await fixture.bus.connect()
            let application = try #require(fixture.fake.application.value)
            let error = await #expect(throws: DBusError.self) {
                try await stranger.call(
                    destination: application.owner, path: try path(fixture.fake, Self.stored),
                    interface: "org.bluez.GattCharacteristic1", method: "WriteValue",
                    arguments: [.bytes([0]), Self.options()])
            }
            #expect(error?.name == .accessDenied)
            #expect(await server.value(of: CharacteristicID(Self.stored, service: Self.service)) == [1, 2, 3])
        }
    }

    @Test func closingUnregistersAndTheStoredDefinitionOpensAgain() async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let adapter = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci1", system: system))
        let events = Locked<[String]>([])
        let definition = Self.definition(events: events)
        for _ in 0..<2 {
            let server = try await GATTServer.start(on: adapter, definition: definition)
            let owner = try #require(fake.application.value?.owner)
            let root = try #require(fake.application.value?.root)
            await server.close()
            #expect(fake.application.value == nil)
            let error = await #expect(throws: DBusError.self) {
                try await fake.connection.call(
                    destination: owner, path: root, interface: "org.freedesktop.DBus.ObjectManager",
                    method: "GetManagedObjects")
            }
            #expect(error?.name == .unknownObject)
        }
        #expect(events.value.filter { $0.hasPrefix("open") } == ["open true", "open false", "open true", "open false"])
    }
}
