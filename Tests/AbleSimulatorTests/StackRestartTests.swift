import Able
import AbleSimulator
import AbleTestSupport
import Testing

/// The simulated stack going away and coming back, as `bluetoothd` restarting does.
@Suite(.timeLimit(.minutes(1)))
struct StackRestartTests {
    @Test func duringTheGapCallsFailWithDaemonUnavailableAndScansEndWithIt() async throws {
        let radio = SimulatedRadio()
        let central = radio.makeAdapter(name: "hci0")
        let peripheral = radio.makeAdapter(name: "hci1")
        let address = await peripheral.state.address
        try await radio.run {
            let scan = try await central.scan()
            radio.stopStack()
            #expect(radio.isStackDown)
            let ended = await #expect(throws: BluetoothError.self) { for try await _ in scan {} }
            #expect(ended?.code == .daemonUnavailable, "\(String(describing: ended))")
            #expect(await !central.state.isPresent)
            let refused = await #expect(throws: BluetoothError.self) { try await central.setAlias("gone") }
            #expect(refused?.code == .daemonUnavailable)
            let advertising = await #expect(throws: BluetoothError.self) {
                _ = try await peripheral.startAdvertising(Advertisement(localName: "x"))
            }
            #expect(advertising?.code == .daemonUnavailable)
            let serving = await #expect(throws: BluetoothError.self) {
                _ = try await GATTServer.start(on: peripheral) { Service("3E0A0010-7E3D-4B1A-9C55-0A1B2C3D4E5F") {} }
            }
            #expect(serving?.code == .daemonUnavailable)

            radio.startStack()
            #expect(!radio.isStackDown)
            #expect(await central.state.isPresent)
            #expect(await peripheral.state.address == address, "the adapter comes back under its address")
            let again = try await central.scan()
            _ = try? await again.first(timeout: .seconds(1))
        }
    }

    @Test func aServerAndItsAdvertisementComeBackByThemselvesAfterARestart() async throws {
        let radio = SimulatedRadio()
        let central = radio.makeAdapter(name: "hci0")
        let peripheral = radio.makeAdapter(name: "hci1")
        let service: BluetoothUUID = "3E0A0011-7E3D-4B1A-9C55-0A1B2C3D4E5F"
        let changes = Locked<[String]>([])
        try await radio.run {
            let server = try await GATTServer.start(on: peripheral) {
                Service(service) {
                    Characteristic("3E0A0012-7E3D-4B1A-9C55-0A1B2C3D4E5F", properties: [.read], value: [1])
                }
                OnServingChange { _, change in
                    changes.value.append(change.isServing ? "serving" : "gap \(change.reason?.code.description ?? "")")
                }
            }
            let advertising = try await peripheral.startAdvertising(
                Advertisement(localName: "back", serviceUUIDs: [service]))
            try await radio.restartStack(down: .seconds(5))
            try await waitUntil { changes.value.count == 2 }
            #expect(changes.value == ["gap daemonUnavailable", "serving"])
            #expect(await server.isServing)
            #expect(await advertising.isActive)
            let found = try await central.scan(ScanFilter(serviceUUIDs: [service])).first(timeout: .seconds(5))
            #expect(found.advertisement.localName == "back")
            await advertising.stop()
            await server.close()
        }
        #expect(radio.openResources.isEmpty, "\(radio.openResources)")
    }

    @Test func aServerOnARemovedAdapterReportsTheGapAndServesAgainWhenTheAdapterIsBack() async throws {
        let radio = SimulatedRadio()
        let peripheral = radio.makeAdapter(name: "hci1")
        let changes = Locked<[String]>([])
        try await radio.run {
            let server = try await GATTServer.start(on: peripheral) {
                Service("3E0A0013-7E3D-4B1A-9C55-0A1B2C3D4E5F") {}
                OnServingChange { _, change in
                    changes.value.append(change.isServing ? "serving" : "gap \(change.reason?.code.description ?? "")")
                }
            }
            radio.removeAdapter(named: "hci1")
            try await waitUntil { changes.value.count == 1 }
            #expect(await !server.isServing)
            _ = radio.makeAdapter(name: "hci1")
            try await waitUntil { changes.value.count == 2 }
            #expect(changes.value == ["gap adapterRemoved", "serving"])
            #expect(await server.isServing)
            await server.close()
        }
    }
}
