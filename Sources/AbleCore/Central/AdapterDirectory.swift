/// What a backend (BlueZ, a simulated radio) provides to list its adapters and follow them
/// appearing and disappearing.
package protocol AdapterDirectory: Sendable {
    /// Every adapter present now, sorted by name.
    func adapters() -> [any AdapterBackend]
    /// `.added` for every adapter present now, then each addition and removal, in order.
    func adapterEvents() -> AsyncStream<AdapterEvent>
}

/// An adapter appearing or disappearing: what `Adapter.events()` (module `Able`) and a simulated radio's
/// `adapterEvents()` deliver.
public enum AdapterEvent: Sendable, CustomStringConvertible {
    /// The adapter is present: it was there when the stream began, or it was just added (plugged in,
    /// its controller created, or `bluetoothd` started and exported it).
    case added(Adapter)
    /// The adapter named so went away (unplugged, its controller removed, or `bluetoothd` stopped).
    /// Its scans and pending operations end with ``BluetoothError/Code/adapterRemoved`` (or
    /// ``BluetoothError/Code/daemonUnavailable`` when `bluetoothd` itself left). An ``Adapter``
    /// value kept for it works again once an adapter of that name is added back.
    case removed(name: String)

    public var description: String {
        switch self {
        case .added(let adapter): "added \(adapter.name)"
        case .removed(let name): "removed \(name)"
        }
    }
}

extension Adapter {
    /// Waits until the adapter is powered, returning at once when it already is.
    ///
    /// An adapter that is absent (BlueZ not started yet, or its controller not yet created) is
    /// waited for too: it is powered once it appears powered. The seed-002 flow waits so for
    /// three seconds before scanning.
    ///
    /// - Parameter timeout: How long to wait, on the backend's clock (simulated time on a
    ///   simulated radio).
    /// - Throws: ``BluetoothError/Code/timeout`` when the adapter is not powered within `timeout`;
    ///   `CancellationError` when the task is cancelled.
    public func waitUntilPowered(timeout: Duration) async throws {
        let states = backend.stateChanges()
        try await withBackendDeadline(timeout, what: "waiting for \(name) to be powered") {
            for await state in states where state.isPresent && state.isPowered { return }
            try Task.checkCancellation()
            throw BluetoothError(.adapterRemoved, message: "\(self.name) stopped reporting its state")
        }
    }

    /// Runs `operation`, throwing ``BluetoothError/Code/timeout`` when it takes longer than
    /// `timeout` on the backend's clock.
    func withBackendDeadline<T: Sendable>(
        _ timeout: Duration, what: String, _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await AbleCore.withBackendDeadline(
            timeout, sleep: { [backend] in try await backend.sleep(for: $0) }, what: what, operation)
    }
}

/// Runs `operation`, throwing ``BluetoothError/Code/timeout`` when it takes longer than `timeout`
/// as `sleep` measures it (the wall clock on BlueZ, simulated time on a simulated radio); the
/// operation is cancelled then.
package func withBackendDeadline<T: Sendable>(
    _ timeout: Duration, sleep: @escaping @Sendable (Duration) async throws -> Void, what: String,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let result = try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await sleep(timeout)
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
    guard let result else {
        try Task.checkCancellation()
        throw BluetoothError(.timeout, message: "\(what) took longer than \(timeout)")
    }
    return result
}
