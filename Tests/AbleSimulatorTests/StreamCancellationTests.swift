import Able
import AbleScenarios
import AbleSimulator
import Testing

/// Every stream follows one rule: cancelling the task that iterates ends the stream, `next()`
/// returns `nil` then and later, and the work behind the stream stops.
///
/// Each consumer takes a first element, says so, and asks again: it is cancelled while it waits
/// for the second (or, on a loaded machine, just before it asks, which must end the same way).
@Suite(.timeLimit(.minutes(1)))
struct StreamCancellationTests {
    static let peripheralAddress: BluetoothAddress = "00:00:00:00:00:01"

    /// What a cancelled consumer saw: its first element, then what `next()` returned after the
    /// cancellation and once more.
    struct Outcome<Element: Sendable>: Sendable {
        var first: Element?
        var afterCancellation: Element?
        var later: Element?
    }

    /// Iterates `stream` in a task on `radio`, cancels the task once it took its first element,
    /// and returns what it saw.
    func cancelAfterFirst<Stream: AsyncSequence & Sendable>(
        _ stream: Stream, on radio: SimulatedRadio, whenIterating start: () async throws -> Void = {}
    ) async throws -> Outcome<Stream.Element> where Stream.Element: Sendable {
        let (tookFirst, signal) = AsyncStream<Void>.makeStream()
        let consumer = Task(executorPreference: radio.clock.executor) {
            var iterator = stream.makeAsyncIterator()
            let first = try await iterator.next()
            signal.finish()
            let afterCancellation = try await iterator.next()
            let later = try await iterator.next()
            return Outcome(first: first, afterCancellation: afterCancellation, later: later)
        }
        try await start()
        for await _ in tookFirst {}
        consumer.cancel()
        return try await consumer.value
    }

    func seedPeripheral(on radio: SimulatedRadio) -> SimulatedPeripheral {
        radio.addPeripheral(
            address: Self.peripheralAddress,
            advertisement: Advertisement(localName: "seed", serviceUUIDs: [SeedService.b.uuid])
        ) {
            Service(SeedService.b) {
                Characteristic(SeedCharacteristic.b2, properties: .notify)
            }
        }
    }

    @Test func cancellingANotificationConsumerEndsTheStreamAndTheSubscription() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let peripheral = seedPeripheral(on: radio)
            let adapter = radio.makeAdapter()
            let device = adapter.peripheral(address: Self.peripheralAddress)
            try await device.connect()
            let stream = try await device.notifications(of: SeedCharacteristic.b2)
            let outcome = try await cancelAfterFirst(stream, on: radio) {
                peripheral.notify(SeedCharacteristic.b2, value: [1])
            }
            #expect(outcome.first == [1])
            #expect(outcome.afterCancellation == nil)
            #expect(outcome.later == nil)
            // The stream value is still here: the cancellation alone ended the subscription.
            #expect(!radio.openResources.contains { $0.hasPrefix("subscription") })
            withExtendedLifetime(stream) {}
            try await device.disconnect()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test func cancellingAScanConsumerEndsTheStreamAndTheScan() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            _ = seedPeripheral(on: radio)
            let adapter = radio.makeAdapter()
            let scan = try await adapter.scan()
            // The peripheral is seen one advertising interval after the scan starts.
            let outcome = try await cancelAfterFirst(scan, on: radio) { try await radio.clock.sleep(for: .seconds(1)) }
            #expect(outcome.first?.address == Self.peripheralAddress)
            #expect(outcome.afterCancellation == nil)
            #expect(outcome.later == nil)
            #expect(radio.openResources.isEmpty)
            withExtendedLifetime(scan) {}
        }
    }

    @Test func cancellingAnAdapterStateConsumerEndsTheStream() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            let adapter = radio.makeAdapter()
            let outcome = try await cancelAfterFirst(await adapter.stateChanges(), on: radio)
            #expect(outcome.first?.isPowered == true)
            #expect(outcome.afterCancellation == nil)
            #expect(outcome.later == nil)
        }
    }

    @Test func cancellingAConnectionStateConsumerEndsTheStream() async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            _ = seedPeripheral(on: radio)
            let adapter = radio.makeAdapter()
            let device = adapter.peripheral(address: Self.peripheralAddress)
            let outcome = try await cancelAfterFirst(await device.connectionStates(), on: radio)
            #expect(outcome.first == .disconnected(reason: nil))
            #expect(outcome.afterCancellation == nil)
            #expect(outcome.later == nil)
        }
    }
}
