import Able
import AbleScenarios
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
        try await clock.run {
            let wall = ContinuousClock.now
            try await clock.sleep(for: .seconds(3600))
            #expect(clock.now.offset == .seconds(3600))
            #expect(ContinuousClock.now - wall < .seconds(30))
        }
    }

    /// Work that takes real time and no simulated time, as any computation does, and that a
    /// loaded machine may stall anywhere: a deadline must not fire before it is done, however long
    /// it takes. A clock that guessed "everything waits" from a quiet spell of yields fired the
    /// sleeper here while the work was still running on another thread.
    @Test func anAutomaticClockWaitsForWorkInProgressHoweverLongItTakes() async throws {
        let clock = SimulatedClock()
        await clock.run {
            let progress = Locked(0)
            let sleeper = Task(executorPreference: clock.executor) { () -> Int in
                try? await clock.sleep(for: .seconds(1))
                return progress.value
            }
            let worker = Task(executorPreference: clock.executor) {
                for step in 1...20 {
                    progress.value = step
                    await Task.yield()
                    var hash: UInt64 = 0
                    for index in 0..<200_000 { hash = hash &* 31 &+ UInt64(index) }
                    #expect(hash != 1)
                }
            }
            await worker.value
            #expect(await sleeper.value == 20)
            #expect(clock.now.offset == .seconds(1))
        }
    }

    /// A test written before ``SimulatedClock/run(_:)`` existed: its steps run on the cooperative
    /// pool, where the clock's executor cannot see them, and a timeout around them must not fire
    /// between two steps. A clock that fired deadlines whenever its executor was idle timed this
    /// out before the second read.
    ///
    /// Outside `run` the clock guesses, and its documented rule is what is checked: a deadline
    /// fires only after 100 ms of real time without a request to the radio. On a quiet machine
    /// all 50 reads finish first. On a loaded one the reading task can wait for a CPU for longer
    /// than that (it did once in CI); the timeout may then win, but only if the steps really
    /// stopped for 100 ms before it.
    @Test func outsideRunATimeoutDoesNotFireBetweenTwoSteps() async throws {
        let radio = SimulatedRadio()
        radio.addPeripheral(address: "00:00:00:00:00:07", advertisement: Advertisement(localName: "p")) {
            Service(SeedService.a) {
                Characteristic(SeedCharacteristic.a1, properties: .read, value: [0x41])
            }
        }
        let peripheral = radio.makeAdapter().peripheral(address: "00:00:00:00:00:07")
        try await peripheral.connect()
        let start = radio.clock.now
        let stepStarts = Locked<[ContinuousClock.Instant]>([])
        let outcome = try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask {
                try await radio.clock.sleep(for: .seconds(3))
                return nil
            }
            group.addTask {
                var reads = 0
                for _ in 0..<50 {
                    stepStarts.value.append(.now)
                    let value = try await peripheral.read(SeedCharacteristic.a1)
                    if value == [0x41] { reads += 1 }
                }
                return reads
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        if let reads = outcome {
            #expect(reads == 50)
            #expect(radio.clock.now == start)
        } else {
            // The timeout won. The step under way when it fired may not have reached the radio
            // yet, so the rule bounds the step before it: it began at least 100 ms before. (With
            // one step begun, the rule bounds the test's own requests, which it does not time.)
            let woken = ContinuousClock.now
            let starts = stepStarts.value
            let bounded = starts.count >= 2 ? starts[starts.count - 2] : nil
            let quiet = bounded.map { $0.duration(to: woken) }
            #expect(
                quiet.map { $0 >= .milliseconds(100) } ?? true,
                "the timeout fired \(String(describing: quiet)) after step \(starts.count - 1) began"
            )
        }
        try await peripheral.disconnect()
    }

    /// The clock is exact only while a ``SimulatedClock/run(_:)`` body is under way: a sleeper
    /// that was waiting before the body is fired by the body's executor, and time still moves by
    /// itself after the body ends.
    @Test func timeMovesBeforeDuringAndAfterARunBody() async throws {
        let clock = SimulatedClock()
        let early = Task { try await clock.sleep(for: .seconds(10)) }
        try await early.value
        #expect(clock.now.offset == .seconds(10))
        try await clock.run {
            try await clock.sleep(for: .seconds(5))
            #expect(clock.now.offset == .seconds(15))
        }
        try await clock.sleep(for: .seconds(1))
        #expect(clock.now.offset == .seconds(16))
    }

    @Test func aScanSeesAPeripheralOneAdvertisingIntervalAfterItStarts() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
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
    }

    /// A discovery that came before `first(timeout:)` was called wins, even over a timeout that
    /// is up at once: it used to race the timeout's task, and lost when that task ran first (the
    /// ReadAcrossServices snippet failed so once under ThreadSanitizer on a loaded machine).
    @Test func aDiscoveryThatCameBeforeFirstWinsOverATimeoutThatIsAlreadyUp() async throws {
        for _ in 0..<20 {
            let radio = SimulatedRadio(clock: SimulatedClock(mode: .manual))
            radio.addPeripheral(address: "00:00:00:00:00:07", advertisement: Advertisement(localName: "early"))
            let scan = try await radio.makeAdapter().scan()
            await radio.clock.advance(by: .seconds(1))  // past the advertising interval
            let discovery = try await scan.first(timeout: .zero)
            #expect(discovery.name == "early")
        }
    }

    @Test func aScanTimesOutOnTheRadiosClock() async throws {
        let radio = SimulatedRadio()
        await radio.run {
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
    }

    @Test func connectingTakesTheConnectionAndResolutionTimes() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
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
