public import AbleSimulator
public import Testing

/// A Swift Testing trait that runs a test with a simulated radio standing for the system's
/// Bluetooth: `Adapter.default()`, `Adapter.named(_:)`, `Adapter.all()` and `Adapter.events()`
/// give the radio's adapters, for that test and the tasks it starts only.
///
/// An app written against the system's adapter is tested unchanged:
///
/// ```swift
/// import Able
/// import AbleSimulator
/// import AbleSimulatorTesting
/// import Testing
///
/// @Test(.simulatedRadio { radio in
///     radio.addPeripheral(address: "00:00:00:00:00:01", advertisement: Advertisement(localName: "HRM"))
/// })
/// func findsTheSensor() async throws {
///     let adapter = try await Adapter.default()  // hci0 of this test's radio
///     let radio = try #require(SimulatedRadio.current)
///     // …
/// }
/// ```
///
/// Each test, and each case of a parameterized test, gets a radio of its own, made before the
/// test runs, so tests running in parallel never see each other's devices. The test's body runs
/// in ``/AbleSimulator/SimulatedRadio/run(isolation:_:)``, so its simulated timings are exact, and
/// within ``/AbleSimulator/SimulatedRadio/withSystemAdapters(isolation:_:)``;
/// ``/AbleSimulator/SimulatedRadio/current`` reaches the radio from the test.
public struct SimulatedRadioTrait: TestTrait, TestScoping {
    /// The names of the adapters the radio starts with.
    public let adapterNames: [String]
    private let setUp: @Sendable (SimulatedRadio) async throws -> Void

    init(adapterNames: [String], setUp: @escaping @Sendable (SimulatedRadio) async throws -> Void) {
        self.adapterNames = adapterNames
        self.setUp = setUp
    }

    /// Makes the test's radio, its adapters and what `setUp` adds, and runs the test with the
    /// radio standing for the system's adapters.
    ///
    /// - Parameters:
    ///   - test: The test.
    ///   - testCase: The test case, for a parameterized test.
    ///   - function: The test's body.
    /// - Throws: What `setUp` or the test throws.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let radio = SimulatedRadio()
        for name in adapterNames { _ = radio.makeAdapter(name: name) }
        // The set-up runs in the scope too, so that the clock sees the work it starts (a GATT
        // server's, say) and ``SimulatedRadio/current`` answers in it.
        try await radio.withSystemAdapters {
            try await radio.run {
                try await setUp(radio)
                try await function()
            }
        }
    }
}

extension Trait where Self == SimulatedRadioTrait {
    /// Runs the test with a simulated radio of its own standing for the system's Bluetooth, with
    /// one adapter, `hci0`.
    public static var simulatedRadio: SimulatedRadioTrait {
        SimulatedRadioTrait(adapterNames: ["hci0"]) { _ in }
    }

    /// Runs the test with a simulated radio of its own standing for the system's Bluetooth.
    ///
    /// ```swift
    /// import Able
    /// import AbleSimulator
    /// import AbleSimulatorTesting
    /// import Testing
    ///
    /// @Test(.simulatedRadio(adapters: ["hci0", "hci1"]) { radio in
    ///     radio.addPeripheral(address: "00:00:00:00:00:01", advertisement: Advertisement(localName: "HRM"))
    /// })
    /// func usesTheSecondAdapter() async throws {
    ///     let adapter = try await Adapter.named("hci1")
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - adapters: The names of the adapters the radio starts with, made in this order before
    ///     `setUp` runs; `Adapter.default()` is the first by name. By default one, `hci0`.
    ///   - setUp: Adds the test's peripherals (and anything else) to the radio before the test
    ///     runs, in the test's scope and on the radio's clock; the test reaches the radio later
    ///     with ``/AbleSimulator/SimulatedRadio/current``.
    /// - Returns: The trait.
    public static func simulatedRadio(
        adapters: [String] = ["hci0"], _ setUp: @escaping @Sendable (SimulatedRadio) async throws -> Void = { _ in }
    ) -> SimulatedRadioTrait {
        SimulatedRadioTrait(adapterNames: adapters, setUp: setUp)
    }
}
