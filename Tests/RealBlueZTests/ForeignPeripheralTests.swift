import Able
import AbleDBus
import Foundation
import Testing

extension RealBlueZ {
    /// Able's central on hci0 against a peripheral Able did not write: BlueZ's own
    /// `example-gatt-server` and `example-advertisement` (bluez-test-scripts) on hci1, run by the
    /// fixture `bluez-example-peripheral.py`.
    @Suite(.timeLimit(.minutes(2)))
    struct ForeignPeripheral {
        /// The example's services and characteristics (its TestService has a 128-bit UUID), and the
        /// fixture's echo service, new for each test.
        final class UUIDs: Sendable {
            let testService: BluetoothUUID = "12345678-1234-5678-1234-56789abcdef0"
            let testCharacteristic: BluetoothUUID = "12345678-1234-5678-1234-56789abcdef1"
            let testDescriptor: BluetoothUUID = "12345678-1234-5678-1234-56789abcdef2"
            let heartRateControlPoint = BluetoothUUID(uuid16: 0x2A39)
            let echoService = BluetoothUUID.random()
            let echo = BluetoothUUID.random()
        }

        @Test func ableScansConnectsReadsWritesAndSubscribesToBlueZsExampleServer() async throws {
            let uuids = UUIDs()
            try await withRig { rig in
                // Scanning first: the kernel drops a report that comes before discovery runs.
                let scan = try await rig.central.scan(ScanFilter(serviceUUIDs: [.heartRate]))
                let example = try Fixture.start(
                    "bluez-example-peripheral.py",
                    [Guest.peripheral, uuids.echoService.uuidString, uuids.echo.uuidString])
                try await withCleanup {
                    _ = try await example.line("the example's application to be registered") {
                        $0.hasPrefix("gatt ")
                    }
                    _ = try await example.line("the example's advertisement to be registered") {
                        $0.hasPrefix("advertisement ")
                    }
                    #expect(example.output.contains("gatt registered"), "\(example.output)")
                    #expect(example.output.contains("advertisement registered"), "\(example.output)")

                    // What example-advertisement puts on the air, decoded by Able.
                    let discovery = try await scan.first(timeout: Rig.discoveryTimeout)
                    #expect(discovery.address == rig.peripheralAddress)
                    let advertised = discovery.advertisement
                    #expect(
                        Set(advertised.serviceUUIDs).isSuperset(of: [.heartRate, .batteryService]), "\(advertised)")
                    #expect(advertised.manufacturerData[0xFFFF] == [0x00, 0x01, 0x02, 0x03], "\(advertised)")
                    #expect(
                        advertised.serviceData[BluetoothUUID(uuid16: 0x9999)] == [0x00, 0x01, 0x02, 0x03, 0x04],
                        "\(advertised)")

                    try await rig.connected(to: discovery) { peripheral in
                        try await exercise(peripheral, example: example, uuids: uuids, rig: rig)
                    }
                } cleanup: {
                    await example.stop()
                }
            }
        }

        private func exercise(_ peripheral: Peripheral, example: ChildProcess, uuids: UUIDs, rig: Rig) async throws {
            let services = Set(try await peripheral.services().map(\.uuid))
            #expect(services.isSuperset(of: [.heartRate, .batteryService, uuids.testService, uuids.echoService]))

            // Reads the example answers.
            let bodySensorLocation = CharacteristicID(.bodySensorLocation, service: .heartRate)
            #expect(try await peripheral.read(bodySensorLocation) == [0x01])
            let batteryLevel = CharacteristicID(.batteryLevel, service: .batteryService)
            // hci0's bluetoothd subscribes to a battery level on its own (its battery plugin), and
            // the example drains it by 2 every 5 s while notified.
            let level = try await peripheral.read(batteryLevel)
            #expect(level.count == 1 && level[0] <= 100 && level[0] % 2 == 0, "\(level)")

            // Its test characteristic keeps what is written with a response.
            let test = CharacteristicID(uuids.testCharacteristic, service: uuids.testService)
            #expect(try await peripheral.read(test) == [])
            try await peripheral.write([1, 2, 3], to: test, type: .withResponse)
            #expect(try await peripheral.read(test) == [1, 2, 3])

            // The fixture's echo characteristic, written both ways.
            let echo = CharacteristicID(uuids.echo, service: uuids.echoService)
            try await peripheral.write([0xA1], to: echo, type: .withResponse)
            #expect(try await peripheral.read(echo) == [0xA1])
            try await peripheral.write([0xB2, 0xB3], to: echo, type: .withoutResponse)
            // (BlueZ 5.66 sends a Write Command on the air, but gives the example no "type" option.)
            _ = try await example.line("the write without response to reach the example") {
                $0.hasPrefix("echo write ") && $0.hasSuffix(" b2b3")
            }
            #expect(try await peripheral.read(echo) == [0xB2, 0xB3])
            let echoed = example.output.split(separator: "\n").filter { $0.hasPrefix("echo write ") }
            #expect(echoed.map { $0.split(separator: " ").last } == ["a1", "b2b3"], "\(example.output)")

            // The heart rate control point accepts 1 and refuses the rest in its own ways.
            let controlPoint = CharacteristicID(uuids.heartRateControlPoint, service: .heartRate)
            try await peripheral.write([0x01], to: controlPoint)
            let refused = await failure { try await peripheral.write([0x02], to: controlPoint) }
            let application = try #require(refused as? BluetoothError, "\(String(describing: refused))")
            #expect(application.code == .attError, "\(application.debugDescription)")
            #expect(application.attError == ATTError.application(0x80), "\(application.debugDescription)")
            let tooLong = await failure { try await peripheral.write([0x01, 0x02], to: controlPoint) }
            let length = try #require(tooLong as? BluetoothError, "\(String(describing: tooLong))")
            #expect(length.attError == .invalidAttributeValueLength, "\(length.debugDescription)")

            // The example's static test descriptor fails in python3-dbus (`dbus.Byte('T')` raises a
            // TypeError), which BlueZ answers with ATT's Unlikely Error; the link is up, so Able
            // reports the ATT error, not a disconnect.
            let testDescriptor = DescriptorID(uuids.testDescriptor, characteristic: test)
            let broken = await failure { try await peripheral.read(testDescriptor) }
            let unlikely = try #require(broken as? BluetoothError, "\(String(describing: broken))")
            #expect(unlikely.code == .attError, "\(unlikely.debugDescription)")
            #expect(unlikely.attError == .unlikelyError, "\(unlikely.debugDescription)")
            #expect(await peripheral.isConnected)

            // Its writable user description.
            let userDescription = DescriptorID(.characteristicUserDescription, characteristic: test)
            #expect(try await peripheral.read(userDescription) == Array("This is a characteristic for testing".utf8))
            try await peripheral.write(Array("Able".utf8), to: userDescription)
            #expect(try await peripheral.read(userDescription) == Array("Able".utf8))

            let mtu = try #require(try await peripheral.mtu(of: test), "BlueZ reports no MTU")
            #expect((23...517).contains(mtu), "MTU \(mtu)")

            // One battery level notification (one every 5 s).
            let battery = try await withDeadline(.seconds(15), waitingFor: "a battery level notification") {
                var values: [[UInt8]] = []
                for try await value in try await peripheral.notifications(of: batteryLevel).prefix(1) {
                    values.append(value)
                }
                return values
            }
            #expect(battery.count == 1 && battery[0].count == 1 && battery[0][0] <= 100, "\(battery)")

            // Exactly three heart rate measurements (one a second), then the subscription ends.
            let measurement = CharacteristicID(.heartRateMeasurement, service: .heartRate)
            let measurements = try await withDeadline(.seconds(20), waitingFor: "three heart rate measurements") {
                var values: [[UInt8]] = []
                for try await value in try await peripheral.notifications(of: measurement).prefix(3) {
                    values.append(value)
                }
                return values
            }
            #expect(measurements.count == 3)
            for value in measurements {
                // Flags 0x06 (sensor contact), 0x08 added with the energy expended; then 90–130 bpm.
                #expect(value.count == 2 || value.count == 4, "\(value)")
                #expect(value.first.map { $0 & 0xF7 } == 0x06, "\(value)")
                #expect(value.count > 1 && (90...130).contains(value[1]), "\(value)")
            }
            let path = try #require(
                try await rig.bus.characteristicPath(.heartRateMeasurement, of: rig.peripheralOnCentral),
                "hci0's BlueZ has no object for the heart rate measurement")
            try await eventually("hci0's BlueZ to stop notifying") {
                try await rig.bus.bluezProperty("Notifying", of: BlueZ.gattCharacteristic1, at: path, as: Bool.self)
                    == false
            }
            // The example's StopNotify ran: it says so (it prints the line on StartNotify and on
            // StopNotify), its timer fires once more, and then it updates its measurement no more.
            _ = try await example.line("the example's StopNotify", timeout: .seconds(10)) { _ in
                example.output.components(separatedBy: "Update HR Measurement Simulation").count == 3
            }
            try await Task.sleep(for: .seconds(1.5))
            let updates = { example.output.components(separatedBy: "Updating value").count }
            let stoppedAt = updates()
            try await Task.sleep(for: .seconds(3))
            #expect(updates() == stoppedAt, "the example kept notifying after the stream ended")
            #expect(await peripheral.isConnected)
        }
    }
}
