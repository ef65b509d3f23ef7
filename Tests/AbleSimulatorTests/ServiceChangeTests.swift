import Able
import AbleSimulator
import Testing

/// `changeServices` on a simulated peripheral, seen through the public API as BlueZ shows a
/// peripheral that sent Service Changed.
@Suite(.timeLimit(.minutes(1)))
struct ServiceChangeTests {
    static let address: BluetoothAddress = "00:00:00:00:0F:02"

    let radio = SimulatedRadio()
    let peripheral: SimulatedPeripheral
    let adapter: Adapter

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
        adapter = radio.makeAdapter()
    }

    @Test func aChangeIsReportedAndTheRemovedCharacteristicIsNamedInItsErrors() async throws {
        try await radio.run {
            let device = adapter.peripheral(address: Self.address)
            try await device.connect()
            let changes = await device.serviceChanges()
            let measurements = try await device.notifications(of: SensorCharacteristic.measurement)
            #expect(try await device.read(SensorCharacteristic.bodySensorLocation) == [1])

            peripheral.changeServices {
                Service(Sensor.service) {
                    Characteristic(SensorCharacteristic.bodySensorLocation, properties: .read, value: [2])
                }
            }
            var iterator = changes.makeAsyncIterator()
            let change = try #require(await iterator.next())
            #expect(!change.contains(SensorCharacteristic.measurement))
            #expect(change.contains(SensorCharacteristic.bodySensorLocation))
            #expect(change.removedCharacteristics.map(\.uuid) == [SensorCharacteristic.measurement.uuid])
            #expect(try await device.services() == change.services)

            let ended = await #expect(throws: BluetoothError.self) { for try await _ in measurements {} }
            #expect(ended?.code == .attributeRemoved)
            #expect(ended?.message.contains(SensorCharacteristic.measurement.uuid.description) == true)
            #expect(ended?.message.contains(Sensor.service.uuid.description) == true)
            let refused = await #expect(throws: BluetoothError.self) {
                _ = try await device.notifications(of: SensorCharacteristic.measurement)
            }
            #expect(refused?.code == .attributeRemoved)
            #expect(refused?.message.contains(SensorCharacteristic.measurement.uuid.description) == true)
            #expect(try await device.read(SensorCharacteristic.bodySensorLocation) == [2])
            #expect(await device.isConnected)
            try await device.disconnect()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aReconnectionToADifferentDatabaseIsAChangeAndTheFirstResolutionIsNot() async throws {
        try await radio.run {
            let device = adapter.peripheral(address: Self.address)
            let changes = await device.serviceChanges()
            try await device.connect()
            try await device.disconnect()
            peripheral.changeServices {
                Service(Sensor.service) { Characteristic(SensorCharacteristic.measurement, properties: .notify) }
            }
            try await device.connect()
            var iterator = changes.makeAsyncIterator()
            let change = try #require(await iterator.next())
            #expect(change.removedCharacteristics.map(\.uuid) == [SensorCharacteristic.bodySensorLocation.uuid])
            #expect(change.services.count == 1)
            try await device.disconnect()
        }
    }

    @Test func aMaintainedSubscriptionIsEnabledAgainAndOneWhoseCharacteristicStaysGoneEnds() async throws {
        let removed = CharacteristicID("2A39", service: Sensor.service.uuid)
        peripheral.changeServices {
            Service(Sensor.service) {
                Characteristic(SensorCharacteristic.measurement, properties: .notify)
                Characteristic(removed.uuid, properties: .notify)
            }
        }
        try await radio.run {
            try await adapter.withMaintainedConnection(to: Self.address) { connection async throws in
                var measurements = connection.notifications(of: SensorCharacteristic.measurement).makeAsyncIterator()
                var others = connection.notifications(of: removed).makeAsyncIterator()
                let first = try await measurements.next()
                #expect(first == .enabled)
                #expect(try await others.next() == .enabled)
                peripheral.notify(SensorCharacteristic.measurement, value: [1])
                let one = try await measurements.next()
                #expect(one == .value([1]))

                // The measurement moves to another handle; 2A39 goes for good.
                let start = radio.clock.now
                peripheral.changeServices {
                    Service(Sensor.service) {
                        Characteristic("2A3A", properties: .read)
                        Characteristic(SensorCharacteristic.measurement, properties: .notify)
                    }
                }
                let gap = try await measurements.next()
                #expect(
                    gap
                        == .interrupted(
                            reason: BluetoothError(.attributeRemoved, message: "\(Self.address) changed its services")))
                let again = try await measurements.next()
                #expect(again == .enabled)
                peripheral.notify(SensorCharacteristic.measurement, value: [2])
                let two = try await measurements.next()
                #expect(two == .value([2]))
                let otherGap = try await others.next()
                #expect(
                    otherGap
                        == .interrupted(
                            reason: BluetoothError(.attributeRemoved, message: "\(Self.address) changed its services")))
                let gone = await #expect(throws: BluetoothError.self) { while try await others.next() != nil {} }
                #expect(gone?.code == .attributeRemoved, "\(String(describing: gone))")
                #expect(gone?.message.contains(removed.uuid.description) == true)
                #expect(
                    start.duration(to: radio.clock.now) >= .seconds(10), "it waited for the characteristic to come back"
                )
                #expect(connection.state.description == "connected")
            }
            #expect(radio.openResources.isEmpty)
        }
    }
}
