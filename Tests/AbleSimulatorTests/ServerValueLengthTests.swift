import Able
import AbleSimulator
import AbleTestSupport
import Testing

/// A GATT server's typed lookups and value lengths on the simulated radio: two services holding
/// the same characteristic UUID stay apart, and a notification or indication longer than a
/// central's link carries is refused, never cut short.
@Suite(.timeLimit(.minutes(1)))
struct ServerValueLengthTests {
    let serviceA = BluetoothUUID("8e2d1001-0000-4000-8000-00000000a61e")
    let serviceB = BluetoothUUID("8e2d1002-0000-4000-8000-00000000a61e")
    let shared = BluetoothUUID("8e2d1003-0000-4000-8000-00000000a61e")
    var inA: CharacteristicID { CharacteristicID(shared, service: serviceA) }
    var inB: CharacteristicID { CharacteristicID(shared, service: serviceB) }

    func definition() -> GATTServerDefinition {
        GATTServerDefinition {
            Service(serviceA) {
                Characteristic(shared, properties: [.read, .notify], value: [0xA]) {
                    Descriptor(.characteristicUserDescription, value: Array("A".utf8))
                }
            }
            Service(serviceB) { Characteristic(shared, properties: [.read, .notify, .indicate], value: [0xB]) }
        }
    }

    /// Connects each central adapter to the server's adapter; returns the peripherals in order.
    func connect(_ centrals: [Adapter], to serverAdapter: Adapter) async throws -> [Peripheral] {
        let advertising = try await serverAdapter.startAdvertising(Advertisement(serviceUUIDs: [serviceA]))
        var peripherals: [Peripheral] = []
        for central in centrals {
            let discovery = try await central.scan(ScanFilter(serviceUUIDs: [serviceA])).first(timeout: .seconds(5))
            let peripheral = central.peripheral(for: discovery)
            try await peripheral.connect()
            peripherals.append(peripheral)
        }
        await advertising.stop()
        return peripherals
    }

    @Test func twoServicesWithTheSameCharacteristicUUIDStayApart() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let serverAdapter = radio.makeAdapter(name: "hci1")
            let server = try await GATTServer.start(on: serverAdapter, definition: definition())
            let hci0 = radio.makeAdapter(name: "hci0")
            let peripheral = try #require(try await connect([hci0], to: serverAdapter).first)
            let central = Central(address: try #require(await hci0.state.address))

            #expect(await server.value(of: inA) == [0xA])
            #expect(await server.value(of: inB) == [0xB])
            try await server.setValue([0xBB], of: inB)
            #expect(try await peripheral.read(inB) == [0xBB])
            #expect(try await peripheral.read(inA) == [0xA])
            let description = DescriptorID(.characteristicUserDescription, characteristic: inA)
            #expect(await server.value(of: description) == Array("A".utf8))
            try await server.setValue(Array("a".utf8), of: description)
            #expect(try await peripheral.read(description) == Array("a".utf8))
            #expect(await server.value(of: DescriptorID(.characteristicUserDescription, characteristic: inB)) == nil)

            let stream = try await peripheral.notifications(of: inB)
            try await radio.clock.sleep(for: .milliseconds(1))
            #expect(await server.isSubscribed(inB))
            #expect(await !server.isSubscribed(inA))
            #expect(await server.subscribers(of: inB) == [central])
            #expect(await server.subscribers(of: inA) == [])
            // Notifying A's reaches no one: the central subscribed to B's.
            try await server.notify(inA, value: [1])
            try await server.notify(inB, value: [2])
            var iterator = stream.makeAsyncIterator()
            #expect(try await iterator.next() == [2])
            #expect(await server.value(of: inA) == [1])

            let missing = CharacteristicID(shared, service: BluetoothUUID("8e2d10ff-0000-4000-8000-00000000a61e"))
            #expect(await server.value(of: missing) == nil)
            #expect(await !server.isSubscribed(missing))
            let error = await #expect(throws: BluetoothError.self) { try await server.notify(missing, value: [1]) }
            #expect(error?.code == .doesNotExist)
            try await peripheral.disconnect()
            await server.close()
        }
    }

    @Test func aHandlerCannotNameACharacteristicUUIDThatTwoServicesHold() async throws {
        let named = GATTServerDefinition {
            Service(serviceA) { Characteristic(shared, properties: .read) }
            Service(serviceB) { Characteristic(shared, properties: .read) }
            OnRead(CharacteristicID(shared, service: serviceA)) { _ in [] }
        }
        let error = #expect(throws: BluetoothError.self) { try named.validate() }
        #expect(error?.code == .invalidArguments)
        #expect(error?.message.contains("could not tell them apart") == true)
        try definition().validate()
    }

    @Test(arguments: [(nil, 20), (247, 244), (517, 512)] as [(Int?, Int)])
    func theLongestValueFollowsTheLink(serverMTU: Int?, expected: Int) async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let serverAdapter = radio.makeAdapter(name: "hci1", mtu: serverMTU)
            let server = try await GATTServer.start(on: serverAdapter, definition: definition())
            let hci0 = radio.makeAdapter(name: "hci0")
            let small = radio.makeAdapter(name: "hci2", mtu: 100)
            let central = Central(address: try #require(await hci0.state.address))
            #expect(await server.maximumValueLength(for: central) == nil, "not connected yet")
            let peripherals = try await connect([hci0, small], to: serverAdapter)
            #expect(await server.maximumValueLength(for: central) == expected)
            #expect(try await peripherals[0].mtu(of: inA) == (serverMTU ?? 23))
            let smallCentral = Central(address: try #require(await small.state.address))
            #expect(await server.maximumValueLength(for: smallCentral) == min(expected, 97))
            #expect(try await peripherals[1].mtu(of: inA) == min(serverMTU ?? 23, 100))
            for peripheral in peripherals { try await peripheral.disconnect() }
            #expect(await server.maximumValueLength(for: central) == nil, "disconnected")
            await server.close()
        }
    }

    @Test func aValueLongerThanOneCentralCanReceiveIsRefusedNotCut() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let serverAdapter = radio.makeAdapter(name: "hci1", mtu: 247)
            let server = try await GATTServer.start(on: serverAdapter, definition: definition())
            let large = radio.makeAdapter(name: "hci0")
            let small = radio.makeAdapter(name: "hci2", mtu: 50)
            let peripherals = try await connect([large, small], to: serverAdapter)
            let streams = [
                try await peripherals[0].notifications(of: inB), try await peripherals[1].notifications(of: inB),
            ]
            try await radio.clock.sleep(for: .milliseconds(1))
            let largeCentral = Central(address: try #require(await large.state.address))
            let smallCentral = Central(address: try #require(await small.state.address))

            // To one central: as long as its link carries, and no longer.
            try await server.notify(inB, value: Array(repeating: 1, count: 244), to: largeCentral)
            let tooLong = await #expect(throws: BluetoothError.self) {
                try await server.notify(inB, value: Array(repeating: 2, count: 48), to: smallCentral)
            }
            #expect(tooLong?.code == .valueTooLong)
            #expect(tooLong?.message.contains("48 bytes") == true, "\(tooLong?.message ?? "")")
            #expect(tooLong?.message.contains("\(smallCentral) can receive 47") == true, "\(tooLong?.message ?? "")")
            let indication = await #expect(throws: BluetoothError.self) {
                try await server.indicate(inB, value: Array(repeating: 3, count: 245), to: largeCentral)
            }
            #expect(indication?.code == .valueTooLong)
            #expect(await server.value(of: inB) == Array(repeating: 1, count: 244), "a refused value is not stored")

            // To every subscriber: refused as a whole when one of them cannot take it.
            let forAll = await #expect(throws: BluetoothError.self) {
                try await server.notify(inB, value: Array(repeating: 4, count: 100))
            }
            #expect(forAll?.code == .valueTooLong)
            #expect(forAll?.message.contains("\(smallCentral) can receive 47") == true, "\(forAll?.message ?? "")")
            #expect(forAll?.message.contains("\(largeCentral)") == false, "\(forAll?.message ?? "")")
            #expect(forAll?.message.contains("nothing was sent") == true, "\(forAll?.message ?? "")")
            let indicated = await #expect(throws: BluetoothError.self) {
                try await server.indicate(inB, value: Array(repeating: 5, count: 48))
            }
            #expect(indicated?.code == .valueTooLong)
            // What fits the smallest goes to everyone.
            try await server.notify(inB, value: Array(repeating: 6, count: 47))

            var toLarge = streams[0].makeAsyncIterator()
            var toSmall = streams[1].makeAsyncIterator()
            #expect(try await toLarge.next() == Array(repeating: 1, count: 244))
            #expect(try await toLarge.next() == Array(repeating: 6, count: 47))
            #expect(try await toSmall.next() == Array(repeating: 6, count: 47))
            for peripheral in peripherals { try await peripheral.disconnect() }
            await server.close()
        }
    }
}
