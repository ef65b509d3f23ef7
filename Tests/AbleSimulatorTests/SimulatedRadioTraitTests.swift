import Able
import AbleSimulator
import AbleSimulatorTesting
import AbleTestSupport
import Testing

/// The `.simulatedRadio` trait: the system's adapter entry points give the test's own radio, for
/// that test and its child tasks only.
@Suite struct SimulatedRadioTraitTests {
    /// Runs in parallel with its other cases: each case puts a device of its own on its radio and
    /// must find that one alone through `Adapter.default()`.
    @Test(.simulatedRadio, arguments: 1...8)
    func parallelTestsEachSeeTheirOwnRadio(_ index: Int) async throws {
        let radio = try #require(SimulatedRadio.current)
        let address = try #require(BluetoothAddress(bytes: [0, 0, 0, 0, 0, UInt8(index)]))
        radio.addPeripheral(address: address, advertisement: Advertisement(localName: "device \(index)"))
        let adapter = try await Adapter.default()
        #expect(adapter.name == "hci0")
        let seen = Locked<[BluetoothAddress]>([])
        // Within the radio's run scope, time is simulated: a second of scanning sees every
        // advertiser in range.
        let stream = try await adapter.scan()
        let deadline = radio.clock.now.advanced(by: .seconds(1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await radio.clock.sleep(until: deadline) }
            group.addTask { for try await discovery in stream { seen.value.append(discovery.address) } }
            try await group.next()
            group.cancelAll()
        }
        #expect(seen.value == [address])
        // A child task is in the scope too.
        let fromChild = await Task { SimulatedRadio.current }.value
        #expect(fromChild === radio)
        #expect(radio.openResources.isEmpty)
    }

    @Test(.simulatedRadio(adapters: ["hci0", "hci1"]))
    func namedAllAndEventsGiveTheRadiosAdapters() async throws {
        let radio = try #require(SimulatedRadio.current)
        #expect(try await Adapter.all().map(\.name) == ["hci0", "hci1"])
        #expect(try await Adapter.named("hci1").name == "hci1")
        await #expect {
            _ = try await Adapter.named("hci7")
        } throws: { ($0 as? BluetoothError)?.code == .doesNotExist }
        var events = try await Adapter.events().makeAsyncIterator()
        #expect(await events.next()?.description == "added hci0")
        #expect(await events.next()?.description == "added hci1")
        radio.removeAdapter(named: "hci0")
        #expect(await events.next()?.description == "removed hci0")
        #expect(try await Adapter.default().name == "hci1")
    }

    @Test(.simulatedRadio(adapters: []))
    func aRadioWithoutAdaptersHasNoDefaultAdapter() async throws {
        await #expect {
            _ = try await Adapter.default()
        } throws: { ($0 as? BluetoothError)?.code == .notAvailable }
        #expect(try await Adapter.all().isEmpty)
    }

    @Test func outsideTheScopeThereIsNoCurrentRadio() async throws {
        #expect(SimulatedRadio.current == nil)
        let radio = SimulatedRadio()
        _ = radio.makeAdapter(name: "hci3")
        let (current, name) = try await radio.withSystemAdapters {
            (SimulatedRadio.current, try await Adapter.default().name)
        }
        #expect(current === radio)
        #expect(name == "hci3")
        #expect(SimulatedRadio.current == nil)
    }
}
