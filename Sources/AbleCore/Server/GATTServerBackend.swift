/// What a backend (BlueZ, the simulator) provides for a ``GATTServer``.
package protocol GATTServerBackend: Sendable {
    /// Serves `core`'s attributes; `events` receives what centrals do.
    func open(_ core: GATTServerCore, events: GATTServerEvents) async throws
    /// Stops serving and removes everything `open` created.
    func close() async
    /// Sends a characteristic's new value to its subscribers, or to `central` only; for an
    /// indication, returns once the central confirmed it. Waits while the way to the central is
    /// full, never drops.
    ///
    /// - Throws: ``BluetoothError/Code/unsupported`` when `central` is named and the backend
    ///   cannot send to one central; ``BluetoothError/Code/valueTooLong`` when the value is longer
    ///   than a way to a subscriber carries (the server checks first; a central may subscribe
    ///   meanwhile), before sending anything: a value is never cut short.
    func send(
        _ value: [UInt8], of characteristic: AttributeID, to central: Central?, indicate: Bool, timeout: Duration
    ) async throws
    /// The centrals connected now.
    var connectedCentrals: [Central] { get }
    /// The ATT MTU of a connected central's link, when the backend knows it; `nil` for a central
    /// that is not connected.
    func attMTU(of central: Central) -> Int?
    /// The longest value that reaches every subscriber of a characteristic through a way that
    /// serves them all and names none (BlueZ before 5.69: one socket for every subscriber); `nil`
    /// where there is none.
    func unnamedSubscribersMaximumValueLength(of characteristic: AttributeID) -> Int?
    /// Disconnects a central.
    func disconnect(_ central: Central) async throws
    /// The backend's clock, as the time since some fixed instant: the wall clock on BlueZ,
    /// simulated time on the simulator. Notification pacing runs on it.
    var clockReading: Duration { get }
    /// Waits `duration` on the backend's clock.
    func sleep(for duration: Duration) async throws
}

private let wallClockOrigin = ContinuousClock.now

extension GATTServerBackend {
    package func unnamedSubscribersMaximumValueLength(of characteristic: AttributeID) -> Int? { nil }

    package var clockReading: Duration { wallClockOrigin.duration(to: .now) }

    package func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}

/// Where a backend reports connections and subscriptions; the server fans them out to the
/// definition's handlers.
package struct GATTServerEvents: Sendable {
    /// A central connected or disconnected.
    package let connectionChanged: @Sendable (CentralConnectionChange) -> Void
    /// A central (`nil` when the backend cannot say which) subscribed or unsubscribed.
    package let subscriptionChanged: @Sendable (Central?, AttributeID, Bool) -> Void
    /// The stack went away under the server (its registration is gone, every central with it),
    /// or came back and the backend registered the server again.
    package let servingChanged: @Sendable (ServingChange) -> Void

    package init(
        connectionChanged: @escaping @Sendable (CentralConnectionChange) -> Void,
        subscriptionChanged: @escaping @Sendable (Central?, AttributeID, Bool) -> Void,
        servingChanged: @escaping @Sendable (ServingChange) -> Void = { _ in }
    ) {
        self.connectionChanged = connectionChanged
        self.subscriptionChanged = subscriptionChanged
        self.servingChanged = servingChanged
    }
}
