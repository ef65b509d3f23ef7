import Able
import AbleSimulator

/// One simulated central's cycle, `count` times (after `warmup` unmeasured): connect to a
/// simulated heart-rate peripheral, read a characteristic, take one notification, disconnect.
/// Simulated time jumps over the connection and resolution times, so the wall time is the
/// simulator's own cost.
func runSimulatorCycles(count: Int, warmup: Int) async throws -> Measurement {
    guard count > 0 else { throw BenchmarkFailure("COUNT must be at least 1") }
    let radio = SimulatedRadio()
    let service = ServiceID(.heartRate)
    let measurement = CharacteristicID(.heartRateMeasurement, service: .heartRate)
    let location = CharacteristicID(.bodySensorLocation, service: .heartRate)
    let heartRate = radio.addPeripheral(
        address: "00:00:00:00:00:01", advertisement: Advertisement(localName: "HRM", serviceUUIDs: [service.uuid])
    ) {
        Service(service) {
            Characteristic(measurement.uuid, properties: .notify)
            Characteristic(location.uuid, properties: .read, value: [1])
        }
    }
    let peripheral = radio.makeAdapter().peripheral(address: heartRate.address)
    // On the radio's simulation, where the clock sees all the work and moves at once: outside
    // it, the clock waits out a quiet spell of real time after each request.
    let (start, end) = try await radio.run {
        var start = Mark.now()
        for cycle in 0..<(count + warmup) {
            if cycle == warmup { start = Mark.now() }
            try await peripheral.connect()
            guard try await peripheral.read(location) == [1] else { throw BenchmarkFailure("wrong location") }
            let stream = try await peripheral.notifications(of: measurement)
            heartRate.notify(measurement, value: [0, UInt8(truncatingIfNeeded: cycle)])
            var received = 0
            for try await _ in stream.prefix(1) { received += 1 }
            guard received == 1 else { throw BenchmarkFailure("no notification") }
            try await peripheral.disconnect()
        }
        return (start, Mark.now())
    }
    guard radio.openResources.isEmpty else { throw BenchmarkFailure("left open: \(radio.openResources)") }
    return Measurement(operations: count, wall: end.wall - start.wall, start: start, end: end)
}
