import Able
import AbleScenarios
import AbleSimulator
import AbleTestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct SimulatorTests {
    static let peripheralAddress: BluetoothAddress = "00:00:00:00:00:01"

    func seedPeripheral(on radio: SimulatedRadio) -> SimulatedPeripheral {
        radio.addPeripheral(
            address: Self.peripheralAddress,
            advertisement: Advertisement(localName: "seed", serviceUUIDs: [SeedService.a.uuid, SeedService.b.uuid])
        ) {
            Service(SeedService.a) {
                Characteristic(SeedCharacteristic.a1, properties: [.read, .write], value: [0x41])
            }
            Service(SeedService.b) {
                Characteristic(SeedCharacteristic.b1, properties: .read, value: [3])
                Characteristic(SeedCharacteristic.b2, properties: .notify)
            }
        }
    }

    @Test func connectionStatesFollowConnectingResolvingAndLosingTheLink() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let device = seedPeripheral(on: radio)
            let adapter = radio.makeAdapter()
            let peripheral = adapter.peripheral(address: Self.peripheralAddress)
            var states = await peripheral.connectionStates().makeAsyncIterator()
            #expect(await states.next() == .disconnected(reason: nil))
            try await peripheral.connect(timeout: .seconds(5))
            #expect(await states.next() == .connecting)
            #expect(await states.next() == .connected)
            device.disconnectAll(reason: .linkTimeout)
            let lost = await states.next()
            #expect(lost == .disconnected(reason: BluetoothError(.linkTimeout, message: "the link timed out")))
            guard case .disconnected(let reason?) = lost else { return }
            #expect(reason.code == .linkTimeout)
            try await peripheral.connect(timeout: .seconds(5))
            #expect(await states.next() == .connecting)
            #expect(await states.next() == .connected)
            try await peripheral.disconnect()
            #expect(await states.next() == .disconnected(reason: nil))
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func theSeedScenarioRunsOnTheSimulatorAndLeavesNothingOpen() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let peripheral = seedPeripheral(on: radio)
            let adapter = radio.makeAdapter()
            let discovery = try await adapter.scan(ScanFilter(serviceUUIDs: [SeedService.b.uuid])).first(
                timeout: .seconds(3))
            #expect(discovery.name == "seed")
            let values = try await adapter.withConnection(to: discovery) { central in
                let a1 = try await central.read(SeedCharacteristic.a1)
                let count = Int(try await central.read(SeedCharacteristic.b1)[0])
                let stream = try await central.notifications(of: SeedCharacteristic.b2)
                for value in 10..<20 { peripheral.notify(SeedCharacteristic.b2, value: [UInt8(value)]) }
                var received = [a1]
                for try await value in stream.prefix(count) { received.append(value) }
                return received
            }
            #expect(values == [[0x41], [10], [11], [12]])
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aGATTServerOnOneSimulatedAdapterServesACentralOnAnother() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let serverAdapter = radio.makeAdapter(name: "hci1")
            let centralAdapter = radio.makeAdapter(name: "hci0")
            let connections = Locked<[Bool]>([])
            let server = try await GATTServer.start(on: serverAdapter) {
                Service(SeedService.a) {
                    Characteristic(SeedCharacteristic.a1, properties: [.read, .notify])
                }
                OnRead(SeedCharacteristic.a1, answering: .immediately) { _ in [0x80, 0x00] }
                OnConnectionStateChange { _, _, isConnected in connections.value.append(isConnected) }
            }
            let advertising = try await serverAdapter.startAdvertising(
                Advertisement(localName: "psm", serviceUUIDs: [SeedService.a.uuid]))
            let discovery = try await centralAdapter.scan(ScanFilter(namePrefix: "ps")).first(timeout: .seconds(3))
            let peripheral = centralAdapter.peripheral(for: discovery)
            try await peripheral.connect()
            #expect(try await peripheral.read(SeedCharacteristic.a1) == [0x80, 0x00])
            let notifications = try await peripheral.notifications(of: SeedCharacteristic.a1)
            #expect(await server.isSubscribed(SeedCharacteristic.a1))
            try await server.notify(SeedCharacteristic.a1, value: [0x81, 0x00])
            for try await value in notifications.prefix(1) { #expect(value == [0x81, 0x00]) }
            try await peripheral.disconnect()
            // The server's handlers run on its own task: let it catch up, in simulated time.
            try await radio.clock.sleep(for: .milliseconds(1))
            #expect(connections.value == [true, false])
            await advertising.stop()
            await server.close()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func injectedFaultsSurfaceAsTheErrorsBlueZWouldGive() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let peripheral = seedPeripheral(on: radio)
            let adapter = radio.makeAdapter()
            let device = adapter.peripheral(address: Self.peripheralAddress)
            peripheral.failNextConnection(.leConnectionAbortByLocal)
            let error = await #expect(throws: BluetoothError.self) { try await device.connect() }
            #expect(error?.code == .connectionAttemptFailed)
            #expect(error?.message == "le-connection-abort-by-local")
            try await device.connect()
            let stream = try await device.notifications(of: SeedCharacteristic.b2)
            peripheral.disconnectAll()
            let dropped = await #expect(throws: BluetoothError.self) { for try await _ in stream {} }
            #expect(dropped?.code == .disconnected)
            #expect(await !device.isConnected)
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aLeakIsReported() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            _ = seedPeripheral(on: radio)
            let device = radio.makeAdapter().peripheral(address: Self.peripheralAddress)
            try await device.connect()
            #expect(radio.openResources.count == 1)
            try await device.disconnect()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aPoweredOffAdapterRefusesToScan() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let adapter = radio.makeAdapter()
            try await adapter.setPowered(false)
            #expect(await !adapter.state.isPowered)
            let error = await #expect(throws: BluetoothError.self) { try await adapter.scan() }
            #expect(error?.code == .notReady)
        }
    }
}
