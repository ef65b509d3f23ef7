import Able
import AbleSimulator
import Testing

/// Passive scanning on the simulated radio, beyond the shared scenario.
struct PassiveScanTests {
    @Test("A passive scan needs a pattern, and the simulator refuses it as BlueZ without -E does")
    func refusals() async throws {
        let radio = SimulatedRadio()
        let adapter = radio.makeAdapter()
        let empty = await #expect(throws: BluetoothError.self) {
            try await adapter.passiveScan(PassiveScanFilter(patterns: []))
        }
        #expect(empty?.code == .invalidArguments)
        let off = await #expect(throws: BluetoothError.self) {
            try await adapter.passiveScan(PassiveScanFilter(patterns: [.manufacturer(1)]))
        }
        #expect(off?.code == .notSupported)
    }
}
