import Able
import AbleSimulator
import Testing

enum Sensor: String, ServiceIdentifier {
    case service = "180D"
}

enum SensorCharacteristic: String, CharacteristicIdentifier {
    case measurement = "2A37"
    case bodySensorLocation = "2A38"
    var service: any ServiceIdentifier { Sensor.service }
}

/// Each fault the simulated radio injects, seen through the public API as BlueZ would show it.
@Suite(.timeLimit(.minutes(1)))
struct FaultInjectionTests {
    static let address: BluetoothAddress = "00:00:00:00:0F:01"

    let radio = SimulatedRadio()
    let peripheral: SimulatedPeripheral
    let device: Peripheral

    init() {
        peripheral = radio.addPeripheral(
            address: Self.address,
            advertisement: Advertisement(localName: "HRM", serviceUUIDs: [Sensor.service.uuid])
        ) {
            Service(Sensor.service) {
                Characteristic(SensorCharacteristic.measurement, properties: .notify)
                Characteristic(SensorCharacteristic.bodySensorLocation, properties: .read, value: [1])
            }
        }
        device = radio.makeAdapter().peripheral(address: Self.address)
    }

    @Test(
        arguments: [
            (
                SimulatedPeripheral.ConnectionFailure.leConnectionAbortByLocal,
                BluetoothError.Code.connectionAttemptFailed
            ),
            (.inProgress, .inProgress),
            (.softwareAbort, .failed),
            (SimulatedPeripheral.ConnectionFailure(.timeout, message: "page timeout"), .timeout),
        ])
    func aConnectionFailsWithTheChosenCodeAndMessage(
        failure: SimulatedPeripheral.ConnectionFailure, code: BluetoothError.Code
    ) async throws {
        try await radio.run {
            peripheral.failNextConnection(failure)
            let error = await #expect(throws: BluetoothError.self) { try await device.connect() }
            #expect(error?.code == code)
            #expect(error?.errorName == nil)
            #expect(error?.message == failure.message)
            #expect(!peripheral.isConnected)
            try await device.connect()
            try await device.disconnect()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func servicesThatNeverResolveTimeTheConnectionOutAndDisconnect() async throws {
        await radio.run {
            peripheral.neverResolveServices()
            let start = radio.clock.now
            let error = await #expect(throws: BluetoothError.self) { try await device.connect(timeout: .seconds(7)) }
            #expect(error?.code == .timeout)
            #expect(start.duration(to: radio.clock.now) == .seconds(7))
            #expect(!peripheral.isConnected)
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aReadInFlightWhenTheLinkDropsThrowsDisconnected() async throws {
        try await radio.run {
            try await device.connect()
            let stream = try await device.notifications(of: SensorCharacteristic.measurement)
            peripheral.dropLinkDuringNextRequest()
            let error = await #expect(throws: BluetoothError.self) {
                try await device.read(SensorCharacteristic.bodySensorLocation)
            }
            #expect(error?.code == .disconnected)
            let ended = await #expect(throws: BluetoothError.self) { for try await _ in stream {} }
            #expect(ended?.code == .disconnected)
            #expect(await !device.isConnected)
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aPeripheralOutOfRangeDropsItsLinkAndCannotBeFoundOrConnected() async throws {
        try await radio.run {
            let adapter = radio.makeAdapter()
            let central = adapter.peripheral(address: Self.address)
            try await central.connect()
            peripheral.goOutOfRange()
            #expect(await !central.isConnected)
            let scan = await #expect(throws: BluetoothError.self) {
                try await adapter.scan().first(timeout: .seconds(5))
            }
            #expect(scan?.code == .timeout)
            await #expect(throws: BluetoothError.self) { try await central.connect() }
            peripheral.comeBackInRange()
            #expect(try await adapter.scan().first(timeout: .seconds(5)).address == Self.address)
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func anAdapterPoweredOffLosesItsConnectionsAndScans() async throws {
        try await radio.run {
            let adapter = radio.makeAdapter()
            let central = adapter.peripheral(address: Self.address)
            try await central.connect()
            let notifications = try await central.notifications(of: SensorCharacteristic.measurement)
            let scan = try await adapter.scan(ScanFilter(namePrefix: "nothing"))
            try await adapter.setPowered(false)
            let ended = await #expect(throws: BluetoothError.self) { for try await _ in notifications {} }
            #expect(ended?.code == .disconnected)
            let scanEnded = await #expect(throws: BluetoothError.self) { for try await _ in scan {} }
            #expect(scanEnded?.code == .notPowered)
            let connect = await #expect(throws: BluetoothError.self) { try await central.connect() }
            #expect(connect?.code == .notReady)
            #expect(radio.openResources.isEmpty)
        }
    }

    /// BlueZ turns a remote ATT error into a D-Bus error, which the error codes follow.
    @Test(arguments: [
        (ATTError.insufficientAuthentication, BluetoothError.Code.notPermitted, "Not paired"),
        (.readNotPermitted, .notPermitted, "Read not permitted"),
        (ATTError(rawValue: 0x80), .attError, "Operation failed with ATT error: 0x80"),
    ])
    func aServerAnswersTheNextRequestWithAnATTError(
        _ attError: ATTError, code: BluetoothError.Code, message: String
    ) async throws {
        try await radio.run {
            try await device.connect()
            peripheral.failNextRequest(with: attError)
            let error = await #expect(throws: BluetoothError.self) {
                try await device.read(SensorCharacteristic.bodySensorLocation)
            }
            #expect(error?.code == code)
            #expect(error?.message == message)
            #expect(try await device.read(SensorCharacteristic.bodySensorLocation) == [1])
            try await device.disconnect()
        }
    }

    @Test func droppedNotificationsNeverArrive() async throws {
        try await radio.run {
            try await device.connect()
            let stream = try await device.notifications(of: SensorCharacteristic.measurement)
            peripheral.dropNotifications(2)
            for value in 1...5 { peripheral.notify(SensorCharacteristic.measurement, value: [0, UInt8(value)]) }
            var received: [[UInt8]] = []
            for try await value in stream.prefix(3) { received.append(value) }
            #expect(received == [[0, 3], [0, 4], [0, 5]])
            try await device.disconnect()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func delayedNotificationsArriveLateInSimulatedTime() async throws {
        try await radio.run {
            try await device.connect()
            let stream = try await device.notifications(of: SensorCharacteristic.measurement)
            peripheral.delayNotifications(by: .milliseconds(750))
            let sent = radio.clock.now
            peripheral.notify(SensorCharacteristic.measurement, value: [0, 60])
            peripheral.notify(SensorCharacteristic.measurement, value: [0, 61])
            var received: [[UInt8]] = []
            for try await value in stream.prefix(2) { received.append(value) }
            #expect(received == [[0, 60], [0, 61]])
            #expect(sent.duration(to: radio.clock.now) == .milliseconds(750))
            try await device.disconnect()
        }
    }

    @Test func theLeakReportNamesWhatATestLeftOpen() async throws {
        try await radio.run {
            let adapter = radio.makeAdapter()
            let central = adapter.peripheral(address: Self.address)
            try await central.connect()
            let stream = try await central.notifications(of: SensorCharacteristic.measurement)
            let scan = try await adapter.scan()
            let listener = try await adapter.listenL2CAP()
            let open = radio.openResources
            #expect(open.count == 4)
            #expect(open.contains { $0.hasPrefix("connection") && $0.contains("\(Self.address)") })
            #expect(open.contains { $0.hasPrefix("subscription") })
            #expect(open.contains { $0.hasPrefix("scan on") })
            #expect(open.contains { $0.hasPrefix("L2CAP listener") && $0.contains("0x0080") })
            withExtendedLifetime(stream) {}
            withExtendedLifetime(scan) {}
            try await central.disconnect()
            await listener.close()
            #expect(radio.openResources == ["scan on \(await adapter.state.address!)"])
        }
    }
}
