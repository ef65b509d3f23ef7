import Able
import AbleSimulator
import Testing

/// ``MaintainedConnection`` on the simulated radio: its backoff, the failures it retries and those
/// it does not, and how it stops. Timings are simulated time.
@Suite(.timeLimit(.minutes(1)))
struct MaintainedConnectionTests {
    static let address: BluetoothAddress = "00:00:00:00:0E:01"

    let radio = SimulatedRadio()
    let peripheral: SimulatedPeripheral
    let adapter: Adapter

    init() {
        peripheral = radio.addPeripheral(
            address: Self.address,
            advertisement: Advertisement(localName: "logger", serviceUUIDs: [Sensor.service.uuid])
        ) {
            Service(Sensor.service) {
                Characteristic(SensorCharacteristic.measurement, properties: .notify)
                Characteristic(SensorCharacteristic.bodySensorLocation, properties: .read, value: [1])
            }
        }
        adapter = radio.makeAdapter()
    }

    /// The states until a final one, each `waiting` as its delay, with the clock's time of each.
    func record(_ connection: MaintainedConnection) async -> [(String, Duration)] {
        var seen: [(String, Duration)] = []
        for await state in connection.connectionStates() {
            let name =
                switch state {
                case .waiting(_, let delay, _): "wait \(delay)"
                case .connecting(let attempt): "attempt \(attempt)"
                case .gaveUp(let error): "gave up \(error.code)"
                default: state.description
                }
            seen.append((name, radio.clock.now.offset))
        }
        return seen
    }

    /// Waits for the connection to be up, with no timeout of its own: a timeout on the automatic
    /// clock could overtake a retry the supervisor is about to schedule on a loaded machine.
    func connected(_ connection: MaintainedConnection) async {
        for await state in connection.connectionStates() {
            if case .connected = state { return }
        }
    }

    @Test func theDelaysGrowToTheMaximumAndTheAttemptsRunOut() {
        let policy = ReconnectPolicy(initialDelay: .milliseconds(500), maximumDelay: .seconds(3), multiplier: 2)
        #expect(
            (1...5).map(policy.delay(afterFailures:)) == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(3), .seconds(3),
            ])
    }

    @Test func aLinkLossIsFollowedByAttemptsWithGrowingDelaysUntilThePolicyGivesUp() async throws {
        try await radio.run {
            let policy = ReconnectPolicy(
                connectTimeout: .seconds(1), initialDelay: .milliseconds(500), maximumDelay: .seconds(2),
                maximumAttempts: 4
            )
            let connection = adapter.maintainConnection(to: Self.address, policy: policy)
            try await connection.waitUntilConnected(timeout: .seconds(5))
            #expect(radio.clock.now.offset == .milliseconds(150), "found in one advertising interval, then connected")
            let lost = radio.clock.now.offset
            async let states = record(connection)
            peripheral.goOutOfRange()
            let seen = await states.map { ($0.0, $0.1 - lost) }
            #expect(
                seen.map(\.0) == [
                    "connected", "disconnected (the peripheral went out of range)", "attempt 1", "wait 0.5 seconds",
                    "attempt 2",
                    "wait 1.0 seconds", "attempt 3", "wait 2.0 seconds", "attempt 4", "gave up doesNotExist",
                ])
            #expect(seen.last?.1 == .milliseconds(3500))
            await connection.stop()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test(arguments: [
        SimulatedPeripheral.ConnectionFailure.leConnectionAbortByLocal, .inProgress, .softwareAbort,
    ])
    func transientFailuresAreRetried(_ failure: SimulatedPeripheral.ConnectionFailure) async throws {
        try await radio.run {
            peripheral.failNextConnection(failure)
            try await adapter.withMaintainedConnection(to: Self.address) { connection in
                await connected(connection)
                let location = try await connection.peripheral.read(SensorCharacteristic.bodySensorLocation)
                #expect(location == [1])
            }
            #expect(!peripheral.isConnected)
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aFailureAnotherAttemptWouldMeetAgainEndsItAndItsSubscriptions() async throws {
        try await radio.run {
            try await adapter.peripheral(address: Self.address).connect()
            try await adapter.peripheral(address: Self.address).disconnect()
            try await adapter.peripheral(address: Self.address).setBlocked(true)
            let connection = adapter.maintainConnection(to: Self.address)
            let notifications = connection.notifications(of: SensorCharacteristic.measurement)
            let error = await #expect(throws: BluetoothError.self) { for try await _ in notifications {} }
            #expect(error?.message == "the device is blocked")
            guard case .gaveUp(let reason) = connection.state else {
                Issue.record("not given up: \(connection.state)")
                return
            }
            #expect(reason.code == .failed)
            await connection.stop()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func cancellingTheTaskStopsItWhileItWaitsAndLeavesNothingOpen() async throws {
        try await radio.run {
            let task = Task.inheritingExecutor {
                try await adapter.withMaintainedConnection(to: Self.address) { connection in
                    let notifications = connection.notifications(of: SensorCharacteristic.measurement)
                    for try await event in notifications {
                        if case .enabled = event { peripheral.goOutOfRange() }
                    }
                }
            }
            try await radio.clock.sleep(for: .seconds(10))
            task.cancel()
            try await task.value
            #expect(!peripheral.isConnected)
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func aSubscriptionSeesTheGapAndResumesWithoutDuplicates() async throws {
        try await radio.run {
            try await adapter.withMaintainedConnection(to: Self.address) { connection in
                var events: [String] = []
                var iterator = connection.notifications(of: SensorCharacteristic.measurement).makeAsyncIterator()
                while let event = try await iterator.next() {
                    events.append(event.description)
                    switch events.count {
                    case 1:
                        peripheral.notify(SensorCharacteristic.measurement, value: [1])
                    case 2:
                        peripheral.goOutOfRange()
                        peripheral.notify(SensorCharacteristic.measurement, value: [2])  // lost: no link
                        try await radio.clock.sleep(for: .seconds(3))
                        peripheral.comeBackInRange()
                    case 4:
                        peripheral.notify(SensorCharacteristic.measurement, value: [3])
                    default:
                        break
                    }
                    if events.count == 5 { break }
                }
                #expect(events == ["enabled", "01", "interrupted (the peripheral went out of range)", "enabled", "03"])
            }
            #expect(radio.openResources.isEmpty)
        }
    }
}

/// A simulated adapter removed under its operations, and added back.
@Suite(.timeLimit(.minutes(1)))
struct RemovedAdapterTests {
    @Test func aConnectionUnderWayFailsAsAdapterRemovedAndTheAdapterWorksOnceAddedBack() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            radio.addPeripheral(
                address: "00:00:00:00:0E:02", advertisement: Advertisement(localName: "p"),
                timing: SimulatedPeripheral.Timing(connectionTime: .seconds(1)))
            let adapter = radio.makeAdapter(name: "hci0")
            let peripheral = adapter.peripheral(address: "00:00:00:00:0E:02")
            let connecting = Task { try await peripheral.connect(timeout: .seconds(5)) }
            try await radio.clock.sleep(for: .milliseconds(500))
            radio.removeAdapter(named: "hci0")
            let error = await #expect(throws: BluetoothError.self) { try await connecting.value }
            #expect(error?.code == .adapterRemoved)
            #expect(radio.adapters().isEmpty)
            let failed = await #expect(throws: BluetoothError.self) { try await adapter.scan() }
            #expect(failed?.code == .adapterRemoved)

            let again = radio.makeAdapter(name: "hci0")
            #expect(await again.state.address == adapter.state.address, "added back with its address")
            try await adapter.waitUntilPowered(timeout: .seconds(1))
            try await peripheral.connect(timeout: .seconds(5))
            try await peripheral.disconnect()
            #expect(radio.openResources.isEmpty)
        }
    }
}
