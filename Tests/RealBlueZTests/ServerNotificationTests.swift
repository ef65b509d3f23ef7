import Able
import AbleBlueZ
import AbleScenarios
import Foundation
import Testing

extension RealBlueZ {
    /// A GATT server's notifications on real BlueZ: paced so that requests keep being answered,
    /// and with two centrals (hci0 and hci2) subscribed to one server on hci1.
    @Suite(.timeLimit(.minutes(3)))
    struct ServerNotifications {
        /// The issue's test: a server notifying in a tight loop while the central reads and writes
        /// 50 times; each request succeeds within 1 s, memory stays bounded, values arrive in order.
        @Test func aServerNotifyingInATightLoopKeepsAnswering() async throws {
            try await withRig { rig in
                try await Scenario.aServerNotifyingInATightLoopKeepsAnswering.run(on: BlueZScenarioBackend(rig: rig))
            }
        }

        /// Notifying everyone reaches both centrals, in order, none lost; each subscriber is named
        /// where BlueZ says (5.69 and later); a central that leaves does not stop the other's values
        /// nor end its subscription, although BlueZ 5.69 and later close its socket then.
        @Test
        func twoCentralsReceiveEveryNotificationInOrder() async throws {
            let uuids = [BluetoothUUID.random(), .random()]
            let subscriptions = Recorder<String>()
            let definition = GATTServerDefinition {
                Service(uuids[0]) { Characteristic(uuids[1], properties: [.read, .notify], value: [0]) }
                OnSubscriptionChange { _, central, _, isSubscribed in
                    subscriptions.append("\(central.map { "\($0.address)" } ?? "?") \(isSubscribed)")
                }
            }
            try await withTwoCentrals(definition, advertising: uuids[0]) { rig, server, first, second, secondAddress in
                let level = CharacteristicID(uuids[1], service: uuids[0])
                let streams = [try await first.notifications(of: level), try await second.notifications(of: level)]
                try await eventually("the server to see both subscriptions") {
                    subscriptions.all.filter { $0.hasSuffix("true") }.count >= (Self.namesSubscribers ? 2 : 1)
                }
                if Self.namesSubscribers {
                    #expect(
                        Set(await server.subscribers(of: CharacteristicID(uuids[1], service: uuids[0])).map(\.address))
                            == [rig.centralAddress, secondAddress])
                    #expect(Set(subscriptions.all) == ["\(rig.centralAddress) true", "\(secondAddress) true"])
                } else {
                    #expect(await server.subscribers(of: CharacteristicID(uuids[1], service: uuids[0])) == [])
                    #expect(subscriptions.all == ["? true"])
                }
                let count = 100
                let values = [Recorder<UInt8>(), Recorder<UInt8>()]
                let consumers = zip(streams, values).map { stream, recorder in
                    Task { for try await value in stream { recorder.append(value.first ?? 0) } }
                }
                defer { for consumer in consumers { consumer.cancel() } }
                for value in 1...count {
                    try await server.notify(CharacteristicID(uuids[1], service: uuids[0]), value: [UInt8(value)])
                }
                try await eventually("both centrals to receive \(count) values", timeout: .seconds(60)) {
                    values.allSatisfy { $0.all.count >= count }
                }
                for recorder in values { #expect(recorder.all == (1...count).map { UInt8($0) }) }

                // hci2 leaves while subscribed. From 5.69 (to 5.87 at least) bluetoothd then closes
                // hci0's socket too (the first subscriber's); hci0 must stay a subscriber and go on
                // receiving all the same.
                try await second.disconnect()
                try await eventually("the server to see hci2 leave") {
                    await !server.connectedCentrals.contains(Able.Central(address: secondAddress))
                }
                if Self.namesSubscribers {
                    try await eventually("hci2 to be no subscriber") {
                        await server.subscribers(of: CharacteristicID(uuids[1], service: uuids[0])).map(\.address) == [
                            rig.centralAddress
                        ]
                    }
                    // Longer than the BlueZ backend takes to tell bluetoothd's mistake from a departure.
                    #expect(
                        try await staysFalse(for: .seconds(5)) {
                            subscriptions.all.contains("\(rig.centralAddress) false")
                        }, "\(subscriptions.all)")
                    #expect(
                        await server.subscribers(of: CharacteristicID(uuids[1], service: uuids[0])).map(\.address) == [
                            rig.centralAddress
                        ])
                }
                for value in 101...105 {
                    try await server.notify(CharacteristicID(uuids[1], service: uuids[0]), value: [UInt8(value)])
                }
                try await eventually("hci0 to receive 5 more values", timeout: .seconds(30)) {
                    values[0].all.count >= count + 5
                }
                if Self.notifiesOneCentral {
                    try await server.notify(
                        CharacteristicID(uuids[1], service: uuids[0]), value: [106],
                        to: Able.Central(address: rig.centralAddress))
                    try await eventually("hci0 to receive the value sent to it", timeout: .seconds(30)) {
                        values[0].all.count >= count + 6
                    }
                }
                let expected = count + (Self.notifiesOneCentral ? 6 : 5)
                #expect(values[0].all == (1...expected).map { UInt8($0) })
                print("subscriptions seen by the server: \(subscriptions.all)")
            }
        }

        /// BlueZ 5.76 and later send what the server writes into one central's socket to that
        /// central only: `notify(…to:)` reaches hci0, and hci2 receives nothing within a second.
        @Test(
            .needsBlueZ(
                5, 76,
                "BlueZ before 5.76 sends a notification written for one central to every subscriber (gatt-database: Fix sending notification to all devices); Able refuses with unsupported there"
            ))
        func notifyingOneCentralReachesItOnly() async throws {
            let uuids = [BluetoothUUID.random(), .random()]
            let definition = GATTServerDefinition {
                Service(uuids[0]) { Characteristic(uuids[1], properties: [.read, .notify], value: [0]) }
            }
            try await withTwoCentrals(definition, advertising: uuids[0]) { rig, server, first, second, secondAddress in
                let level = CharacteristicID(uuids[1], service: uuids[0])
                let firstStream = try await first.notifications(of: level)
                let secondStream = try await second.notifications(of: level)
                try await eventually("the server to name both subscribers") {
                    await server.subscribers(of: CharacteristicID(uuids[1], service: uuids[0])).count == 2
                }
                let secondValues = Recorder<[UInt8]>()
                let secondConsumer = Task { for try await value in secondStream { secondValues.append(value) } }
                defer { secondConsumer.cancel() }
                for value in 1...5 {
                    try await server.notify(
                        CharacteristicID(uuids[1], service: uuids[0]), value: [UInt8(value)],
                        to: Able.Central(address: rig.centralAddress))
                }
                let received = try await withDeadline(.seconds(30), waitingFor: "5 notifications on hci0") {
                    var values: [[UInt8]] = []
                    for try await value in firstStream.prefix(5) { values.append(value) }
                    return values
                }
                #expect(received == (1...5).map { [UInt8($0)] })
                #expect(try await staysFalse(for: .seconds(1)) { !secondValues.all.isEmpty })
                // And the other way round.
                try await server.notify(
                    CharacteristicID(uuids[1], service: uuids[0]), value: [0xEE],
                    to: Able.Central(address: secondAddress))
                try await eventually("hci2 to receive its own value") { secondValues.all == [[0xEE]] }
            }
        }

        /// From 5.80 BlueZ confirms an indication through each central's socket: `indicate`
        /// returns after both confirmed, `indicate(…to:)` reaches one, and a central that leaves
        /// mid-indication makes `indicate` throw (or not count it), never wait out its timeout.
        @Test(
            .needsBlueZ(
                5, 80,
                "BlueZ before 5.80 confirms indications only through Confirm, which names no central (gatt: Implement confirmation support for AcquireNotify); Able refuses indicate(to:) with unsupported there"
            ))
        func indicationsAreConfirmedByEachCentral() async throws {
            let uuids = [BluetoothUUID.random(), .random()]
            let definition = GATTServerDefinition {
                Service(uuids[0]) { Characteristic(uuids[1], properties: [.read, .indicate], value: [0]) }
            }
            try await withTwoCentrals(definition, advertising: uuids[0]) { rig, server, first, second, secondAddress in
                let status = CharacteristicID(uuids[1], service: uuids[0])
                let streams = [try await first.notifications(of: status), try await second.notifications(of: status)]
                let values = [Recorder<UInt8>(), Recorder<UInt8>()]
                let consumers = zip(streams, values).map { stream, recorder in
                    Task { for try await value in stream { recorder.append(value.first ?? 0) } }
                }
                defer { for consumer in consumers { consumer.cancel() } }
                try await eventually("the server to name both subscribers") {
                    await server.subscribers(of: CharacteristicID(uuids[1], service: uuids[0])).count == 2
                }
                for value in 1...3 {
                    try await server.indicate(
                        CharacteristicID(uuids[1], service: uuids[0]), value: [UInt8(value)], timeout: .seconds(10))
                }
                try await eventually("both centrals to receive 3 indications") {
                    values.allSatisfy { $0.all.count >= 3 }
                }
                for recorder in values { #expect(recorder.all == [1, 2, 3]) }

                try await server.indicate(
                    CharacteristicID(uuids[1], service: uuids[0]), value: [0x10],
                    to: Able.Central(address: rig.centralAddress), timeout: .seconds(10))
                try await eventually("hci0 to receive its own indication") { values[0].all.last == 0x10 }
                #expect(try await staysFalse(for: .seconds(1)) { values[1].all.count > 3 })

                // hci2 leaves while indications flow: each indicate returns or throws at once.
                let loop = Task {
                    var outcomes: [String] = []
                    for value in 0x20..<0x30 {
                        do {
                            try await server.indicate(
                                CharacteristicID(uuids[1], service: uuids[0]), value: [UInt8(value)],
                                timeout: .seconds(20))
                            outcomes.append("ok")
                        } catch let error as BluetoothError {
                            let code =
                                error.code == .timeout
                                ? "timeout" : error.code == .disconnected ? "disconnected" : "other"
                            outcomes.append("\(code): \(error.message)")
                        }
                    }
                    return outcomes
                }
                try await Task.sleep(for: .milliseconds(700))
                try await second.disconnect()
                let outcomes = try await withDeadline(.seconds(90), waitingFor: "16 indications") {
                    try await loop.value
                }
                print("indications while hci2 left: \(outcomes)")
                #expect(!outcomes.contains { $0.hasPrefix("timeout") }, "\(outcomes)")
                for outcome in outcomes where outcome != "ok" {
                    #expect(outcome.contains("\(secondAddress)"), "\(outcome)")
                }
                #expect(outcomes.last == "ok")
            }
        }

        static var namesSubscribers: Bool { (Guest.bluezVersion ?? .init(0, 0)) >= .init(5, 69) }
        static var notifiesOneCentral: Bool { (Guest.bluezVersion ?? .init(0, 0)) >= .init(5, 76) }

        /// Serves `definition` on hci1, connects hci0 and then hci2 to it (advertising again for
        /// hci2: hci1 stops advertising after its first connection), and runs `body`.
        func withTwoCentrals(
            _ definition: GATTServerDefinition, advertising service: BluetoothUUID,
            _ body: (Rig, GATTServer, Peripheral, Peripheral, BluetoothAddress) async throws -> Void
        ) async throws {
            let secondAdapter = try await Adapter.named(Guest.secondCentral)
            let secondAddress = try #require(await secondAdapter.state.address)
            try await withRig { rig in
                await rig.bus.removeDevices(of: Guest.secondCentral, address: rig.peripheralAddress.description)
                await rig.bus.removeDevices(of: Guest.peripheral, address: secondAddress.description)
                defer {
                    Task {
                        await rig.bus.removeDevices(of: Guest.secondCentral, address: rig.peripheralAddress.description)
                        await rig.bus.removeDevices(of: Guest.peripheral, address: secondAddress.description)
                    }
                }
                try await rig.serving(definition) { server in
                    try await rig.discovering([service]) { discovery in
                        try await rig.connected(to: discovery) { first in
                            let scan = try await secondAdapter.scan(ScanFilter(serviceUUIDs: [service]))
                            // Connect while advertising: hci1 is connectable only then.
                            let second = try await rig.advertising([service], name: "able2") {
                                let found = try await scan.first(timeout: Rig.discoveryTimeout)
                                let second = secondAdapter.peripheral(for: found)
                                try await rig.connect(second, from: Guest.secondCentral)
                                return second
                            }
                            do {
                                try await body(rig, server, first, second, secondAddress)
                            } catch {
                                try? await second.disconnect()
                                throw error
                            }
                            try? await second.disconnect()
                        }
                    }
                }
            }
        }
    }
}
