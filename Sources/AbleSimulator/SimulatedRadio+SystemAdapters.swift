import AbleCore

extension SimulatedRadio {
    @TaskLocal static var scoped: SimulatedRadio?

    /// The radio whose adapters stand for the system's in this task: set by
    /// ``withSystemAdapters(isolation:_:)`` and by the `.simulatedRadio` test trait (module
    /// `AbleSimulatorTesting`); `nil` outside them.
    ///
    /// ```swift
    /// import Able
    /// import AbleSimulator
    /// import AbleSimulatorTesting
    /// import Testing
    ///
    /// @Test(.simulatedRadio) func findsTheSensor() async throws {
    ///     let radio = try #require(SimulatedRadio.current)
    ///     radio.addPeripheral(address: "00:00:00:00:00:01", advertisement: Advertisement(localName: "HRM"))
    ///     // … the app under test calls Adapter.default() …
    /// }
    /// ```
    public static var current: SimulatedRadio? { scoped }

    /// Runs `body` with this radio's adapters standing for the system's: within it, and in the
    /// child tasks it starts, `Adapter.default()` is the radio's first adapter by name,
    /// `Adapter.named(_:)` the radio's adapter of that name, `Adapter.all()` the radio's adapters
    /// and `Adapter.events()` follows them (module `Able`); ``current`` is this radio.
    ///
    /// Code written against the system's adapter is then tested unchanged. The scope is a task
    /// local: tasks outside it, such as tests running in parallel, see their own radio or the
    /// system's adapters on BlueZ. A detached task (`Task.detached`) leaves the scope.
    ///
    /// ```swift
    /// let radio = SimulatedRadio()
    /// _ = radio.makeAdapter(name: "hci0")
    /// try await radio.withSystemAdapters {
    ///     let adapter = try await Adapter.default()  // hci0 of `radio`
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - isolation: The actor `body` runs on; by default the caller's.
    ///   - body: The code that sees the radio's adapters as the system's.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func withSystemAdapters<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        try await SystemAdapterOverride.$directory.withValue(SimulatedAdapterDirectory(radio: self)) {
            try await Self.$scoped.withValue(self) { try await body() }
        }
    }
}
