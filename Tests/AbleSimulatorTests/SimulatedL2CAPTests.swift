import Able
import AbleSimulator
import Testing

@Suite(.timeLimit(.minutes(1)))
struct SimulatedL2CAPTests {
    @Test func aChannelEchoesThroughTheListenerAndLeavesNothingOpen() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let server = radio.makeAdapter(name: "hci1")
            let central = radio.makeAdapter(name: "hci0")
            let listener = try await server.listenL2CAP(receiveMTU: 512)
            #expect(listener.psm == PSM(rawValue: 0x0080))
            let serverAddress = try #require(await server.state.address)
            let echo = Task(executorPreference: radio.clock.executor) {
                for try await channel in listener.channels {
                    // The central closing its end ends the stream, as on a Bluetooth link.
                    for try await packet in channel.packets { try await channel.send(packet) }
                    await channel.close()
                }
            }
            let channel = try await central.peripheral(address: serverAddress).openL2CAPChannel(psm: listener.psm)
            #expect(channel.sendMTU == 512)
            #expect(channel.receiveMTU == 672)
            #expect(channel.peerAddress == serverAddress)
            var replies: [[UInt8]] = []
            var packets = channel.packets.makeAsyncIterator()
            for index in 0..<5 {
                try await channel.send([UInt8(index), 0xEE])
                replies.append(try #require(try await packets.next()))
            }
            #expect(replies == (0..<5).map { [UInt8($0), 0xEE] })
            #expect(radio.openResources.contains { $0.hasPrefix("L2CAP channel") })
            await channel.close()
            await listener.close()
            try await echo.value
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func dynamicPSMsAreHandedOutInOrderAndATakenOneIsRefused() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let adapter = radio.makeAdapter()
            let first = try await adapter.listenL2CAP()
            let second = try await adapter.listenL2CAP()
            #expect([first.psm, second.psm] == [PSM(rawValue: 0x0080), PSM(rawValue: 0x0081)])
            let error = await #expect(throws: BluetoothError.self) { try await adapter.listenL2CAP(psm: first.psm) }
            #expect(error?.code == .alreadyExists)
            let invalid = await #expect(throws: BluetoothError.self) {
                try await adapter.listenL2CAP(psm: PSM(rawValue: 0x0100))
            }
            #expect(invalid?.code == .invalidArguments)
            #expect(radio.openResources.count == 2)
            await first.close()
            let reused = try await adapter.listenL2CAP()
            #expect(reused.psm == PSM(rawValue: 0x0080))
            await second.close()
            await reused.close()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aPSMNobodyListensOnRefusesTheChannel() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let server = radio.makeAdapter()
            let central = radio.makeAdapter()
            let address = try #require(await server.state.address)
            let error = await #expect(throws: BluetoothError.self) {
                try await central.peripheral(address: address).openL2CAPChannel(psm: PSM(rawValue: 0x0080))
            }
            #expect(error?.code == .connectionAttemptFailed)
            let listener = try await server.listenL2CAP()
            await listener.close()
            let afterClose = await #expect(throws: BluetoothError.self) {
                try await central.peripheral(address: address).openL2CAPChannel(psm: listener.psm)
            }
            #expect(afterClose?.code == .connectionAttemptFailed)
        }
    }

    @Test func theChannelsOfALinkThatDropsAreDisconnected() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let server = radio.makeAdapter(name: "hci1")
            let central = radio.makeAdapter(name: "hci0")
            let gatt = try await GATTServer.start(on: server) {
                Service(BluetoothUUID.heartRate) {
                    Characteristic(BluetoothUUID.heartRateMeasurement, properties: .read, value: [0])
                }
            }
            let advertising = try await server.startAdvertising(Advertisement(localName: "l2cap"))
            let listener = try await server.listenL2CAP()
            let peripheral = central.peripheral(address: try #require(await server.state.address))
            try await peripheral.connect()
            let channel = try await peripheral.openL2CAPChannel(psm: listener.psm)
            var accepted = listener.channels.makeAsyncIterator()
            let serverChannel = try #require(try await accepted.next())
            try await peripheral.disconnect()
            for end in [channel, serverChannel] {
                let error = await #expect(throws: BluetoothError.self) { for try await _ in end.packets {} }
                #expect(error?.code == .disconnected)
                let send = await #expect(throws: BluetoothError.self) { try await end.send([1]) }
                #expect(send?.code == .disconnected)
            }
            await channel.close()
            await serverChannel.close()
            await listener.close()
            await advertising.stop()
            await gatt.close()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aChannelClosedByOneSideEndsTheOtherAsTheKernelReportsIt() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let server = radio.makeAdapter()
            let central = radio.makeAdapter()
            let listener = try await server.listenL2CAP()
            let channel = try await central.peripheral(address: try #require(await server.state.address))
                .openL2CAPChannel(psm: listener.psm)
            var accepted = listener.channels.makeAsyncIterator()
            let serverChannel = try #require(try await accepted.next())
            try await channel.send([7])
            await channel.close()
            var received: [[UInt8]] = []
            for try await packet in serverChannel.packets { received.append(packet) }
            #expect(received == [[7]])
            await serverChannel.close()
            await listener.close()
            #expect(radio.openResources.isEmpty)
        }
    }
}
