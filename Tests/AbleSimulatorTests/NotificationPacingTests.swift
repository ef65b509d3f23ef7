import Able
import AbleSimulator
import AbleTestSupport
import Testing

/// Notification pacing and notifying one central on the simulated radio, timed exactly on its
/// clock.
@Suite(.timeLimit(.minutes(1)))
struct NotificationPacingTests {
    let service = BluetoothUUID("8e2d0001-0000-4000-8000-00000000a61e")
    let levelUUID = BluetoothUUID("8e2d0002-0000-4000-8000-00000000a61e")
    var level: CharacteristicID { CharacteristicID(levelUUID, service: service) }

    /// Connects each central adapter to the server's adapter and subscribes it to `level`.
    func subscribe(
        _ centrals: [Adapter], to serverAdapter: Adapter, server: GATTServer
    ) async throws -> [(Peripheral, NotificationStream)] {
        let advertising = try await serverAdapter.startAdvertising(Advertisement(serviceUUIDs: [service]))
        defer { Task { await advertising.stop() } }
        var result: [(Peripheral, NotificationStream)] = []
        for central in centrals {
            let discovery = try await central.scan(ScanFilter(serviceUUIDs: [service])).first(timeout: .seconds(5))
            let peripheral = central.peripheral(for: discovery)
            try await peripheral.connect()
            result.append(
                (peripheral, try await peripheral.notifications(of: level)))
        }
        await advertising.stop()
        return result
    }

    @Test func aTightLoopIsPacedToTheRateAfterTheBurst() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let serverAdapter = radio.makeAdapter(name: "hci1")
            let server = try await GATTServer.start(on: serverAdapter, pacing: .perSecond(10, burst: 2)) {
                Service(service) { Characteristic(level, properties: [.read, .notify]) }
            }
            let subscribed = try await subscribe([radio.makeAdapter(name: "hci0")], to: serverAdapter, server: server)
            let start = radio.clock.now
            var times: [Duration] = []
            for value in 1...6 {
                try await server.notify(level, value: [UInt8(value)])
                times.append(start.duration(to: radio.clock.now))
            }
            #expect(
                times == [.zero, .zero, .milliseconds(100), .milliseconds(200), .milliseconds(300), .milliseconds(400)])
            var received: [[UInt8]] = []
            for try await value in subscribed[0].1.prefix(6) { received.append(value) }
            #expect(received == (1...6).map { [UInt8($0)] })
            try await subscribed[0].0.disconnect()
            await server.close()
        }
    }

    @Test func withoutSubscribersNotifyingDoesNotWait() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let server = try await GATTServer.start(
                on: radio.makeAdapter(name: "hci1"), pacing: .perSecond(1, burst: 1)
            ) {
                Service(service) { Characteristic(level, properties: [.read, .notify]) }
            }
            let start = radio.clock.now
            for value in 1...5 { try await server.notify(level, value: [UInt8(value)]) }
            #expect(start.duration(to: radio.clock.now) == .zero)
            #expect(await server.value(of: level) == [5])
            await server.close()
        }
    }

    @Test func aPacingBelowOneIsRefused() async throws {
        let radio = SimulatedRadio()
        await radio.run {
            let adapter = radio.makeAdapter(name: "hci1")
            for pacing in [NotificationPacing.perSecond(0), .perSecond(5, burst: 0)] {
                let error = await #expect(throws: BluetoothError.self) {
                    _ = try await GATTServer.start(on: adapter, pacing: pacing) {
                        Service(service) { Characteristic(level, properties: [.notify]) }
                    }
                }
                #expect(error?.code == .invalidArguments)
            }
        }
    }

    @Test func oneCentralReceivesWhatIsMeantForItAndBothAreNamedAndPacedApart() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let serverAdapter = radio.makeAdapter(name: "hci1")
            let subscriptions = Locked<[String]>([])
            let server = try await GATTServer.start(on: serverAdapter, pacing: .perSecond(10, burst: 2)) {
                Service(service) { Characteristic(level, properties: [.read, .notify]) }
                OnSubscriptionChange { _, central, _, isSubscribed in
                    subscriptions.value.append("\(central.map { "\($0.address)" } ?? "?") \(isSubscribed)")
                }
            }
            let hci0 = radio.makeAdapter(name: "hci0")
            let hci2 = radio.makeAdapter(name: "hci2")
            let subscribed = try await subscribe([hci0, hci2], to: serverAdapter, server: server)
            let first = Central(address: try #require(await hci0.state.address))
            let second = Central(address: try #require(await hci2.state.address))
            #expect(await server.subscribers(of: level) == [first, second].sorted { $0.address < $1.address })
            try await radio.clock.sleep(for: .milliseconds(1))
            #expect(Set(subscriptions.value) == ["\(first.address) true", "\(second.address) true"])

            let start = radio.clock.now
            var times: [Duration] = []
            // Two to the first central spend its burst, not the second's.
            for value in [0xA1, 0xA2] as [UInt8] {
                try await server.notify(level, value: [value], to: first)
                times.append(start.duration(to: radio.clock.now))
            }
            // To everyone: waits for the first central's next token.
            for value in [0xB1, 0xB2] as [UInt8] {
                try await server.notify(level, value: [value])
                times.append(start.duration(to: radio.clock.now))
            }
            #expect(times == [.zero, .zero, .milliseconds(100), .milliseconds(200)])

            var toFirst: [[UInt8]] = []
            for try await value in subscribed[0].1.prefix(4) { toFirst.append(value) }
            #expect(toFirst == [[0xA1], [0xA2], [0xB1], [0xB2]])
            var toSecond: [[UInt8]] = []
            for try await value in subscribed[1].1.prefix(2) { toSecond.append(value) }
            #expect(toSecond == [[0xB1], [0xB2]])

            // Taking the values it wanted ended each central's subscription.
            try await radio.clock.sleep(for: .milliseconds(1))
            #expect(await server.subscribers(of: level) == [])
            #expect(subscriptions.value.count == 4)
            try await subscribed[1].0.disconnect()
            try await subscribed[0].0.disconnect()
            await server.close()
            #expect(radio.openResources.isEmpty)
        }
    }
}
