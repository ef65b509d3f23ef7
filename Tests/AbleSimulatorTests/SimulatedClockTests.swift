import Able
import AbleSimulator
import AbleTestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct SimulatedClockTests {
    @Test func aManualClockWakesSleepersOnlyWhenAdvancedPastTheirDeadlines() async throws {
        let clock = SimulatedClock(mode: .manual)
        let woken = Locked<[Int]>([])
        let sleepers = (1...3).reversed().map { index in
            Task {
                try await clock.sleep(for: .seconds(index))
                woken.value.append(index)
            }
        }
        while clock.pendingCount < 3 { await Task.yield() }
        #expect(woken.value.isEmpty)
        await clock.advance(by: .seconds(2))
        #expect(clock.pendingCount == 1)
        #expect(clock.now.offset == .seconds(2))
        #expect(!woken.value.contains(3))
        await clock.advance(by: .seconds(1))
        #expect(clock.pendingCount == 0)
        for sleeper in sleepers { try await sleeper.value }
        #expect(woken.value.sorted() == [1, 2, 3])
    }

    @Test func cancellingASleeperThrowsAtOnce() async throws {
        let clock = SimulatedClock(mode: .manual)
        let sleeper = Task { try await clock.sleep(for: .seconds(60)) }
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.now.offset == .zero)
    }

    @Test func anAutomaticClockJumpsToTheNextDeadlineWithoutRealTime() async throws {
        let clock = SimulatedClock()
        let wall = ContinuousClock.now
        try await clock.sleep(for: .seconds(3600))
        #expect(clock.now.offset == .seconds(3600))
        #expect(ContinuousClock.now - wall < .seconds(30))
    }

    @Test func aScanSeesAPeripheralOneAdvertisingIntervalAfterItStarts() async throws {
        let radio = SimulatedRadio()
        radio.addPeripheral(
            address: "00:00:00:00:00:07", advertisement: Advertisement(localName: "slow"),
            timing: SimulatedPeripheral.Timing(advertisingInterval: .milliseconds(1280)))
        let adapter = radio.makeAdapter()
        let start = radio.clock.now
        let discovery = try await adapter.scan().first(timeout: .seconds(10))
        #expect(discovery.name == "slow")
        #expect(start.duration(to: radio.clock.now) == .milliseconds(1280))
        #expect(radio.openResources.isEmpty)
    }

    @Test func aScanTimesOutOnTheRadiosClock() async throws {
        let radio = SimulatedRadio()
        radio.addPeripheral(address: "00:00:00:00:00:07", advertisement: Advertisement(localName: "other"))
        let adapter = radio.makeAdapter()
        let wall = ContinuousClock.now
        let error = await #expect(throws: BluetoothError.self) {
            try await adapter.scan(ScanFilter(namePrefix: "wanted")).first(timeout: .seconds(120))
        }
        #expect(error?.code == .timeout)
        #expect(radio.clock.now.offset == .seconds(120))
        #expect(ContinuousClock.now - wall < .seconds(30))
        #expect(radio.openResources.isEmpty)
    }

    @Test func connectingTakesTheConnectionAndResolutionTimes() async throws {
        let radio = SimulatedRadio()
        radio.addPeripheral(
            address: "00:00:00:00:00:07", advertisement: Advertisement(localName: "p"),
            timing: SimulatedPeripheral.Timing(
                connectionTime: .milliseconds(45), serviceResolutionTime: .milliseconds(5)))
        let peripheral = radio.makeAdapter().peripheral(address: "00:00:00:00:00:07")
        try await peripheral.connect()
        // The adapter did not know the address: it found it first, one advertising interval (100 ms).
        #expect(radio.clock.now.offset == .milliseconds(150))
        try await peripheral.disconnect()
        try await peripheral.connect()
        #expect(radio.clock.now.offset == .milliseconds(200))
        try await peripheral.disconnect()
    }

    @Test func aManualClockTimesAConnectionOutOnlyWhenTheTestAdvancesIt() async throws {
        let radio = SimulatedRadio(clock: SimulatedClock(mode: .manual))
        let peripheral = radio.addPeripheral(address: "00:00:00:00:00:07", advertisement: Advertisement())
        peripheral.neverResolveServices()
        let device = radio.makeAdapter().peripheral(address: "00:00:00:00:00:07")
        let connecting = Task { try await device.connect(timeout: .seconds(5)) }
        while radio.clock.pendingCount == 0 { await Task.yield() }
        await radio.clock.advance(by: .seconds(1))
        #expect(peripheral.isConnected)
        await radio.clock.advance(by: .seconds(4))
        let error = await #expect(throws: BluetoothError.self) { try await connecting.value }
        #expect(error?.code == .timeout)
        #expect(!peripheral.isConnected)
        #expect(radio.openResources.isEmpty)
    }
}
