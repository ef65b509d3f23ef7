/// What a backend (BlueZ, the simulator) provides for a ``GATTServer``.
package protocol GATTServerBackend: Sendable {
    /// Serves `core`'s attributes; `events` receives what centrals do.
    func open(_ core: GATTServerCore, events: GATTServerEvents) async throws
    /// Stops serving and removes everything `open` created.
    func close() async
    /// Sends a characteristic's new value to its subscribers; for an indication, returns once
    /// the central confirmed it.
    func send(_ value: [UInt8], of characteristic: AttributeID, indicate: Bool, timeout: Duration) async throws
    /// The centrals connected now.
    var connectedCentrals: [Central] { get }
    /// Disconnects a central.
    func disconnect(_ central: Central) async throws
}

/// Where a backend reports connections and subscriptions; the server fans them out to the
/// definition's handlers.
package struct GATTServerEvents: Sendable {
    package let connectionChanged: @Sendable (Central, Bool) -> Void
    package let subscriptionChanged: @Sendable (Central?, AttributeID, Bool) -> Void
}
