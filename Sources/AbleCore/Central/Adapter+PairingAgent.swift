/// What a backend provides for an adapter's standing pairing agent.
package protocol PairingAgentBackend: AdapterBackend {
    /// The standing agent set now, if any.
    var pairingAgent: PairingAgent? { get }
    /// Sets the standing agent, or clears it with `nil`.
    func setPairingAgent(_ agent: PairingAgent?) async throws
}

extension Adapter {
    /// The agent that answers pairing on this adapter while no ``Peripheral/pair(with:timeout:)``
    /// is under way with the device asking, or `nil` when none is set.
    public nonisolated var pairingAgent: PairingAgent? { (backend as? any PairingAgentBackend)?.pairingAgent }

    /// Sets the agent that answers every pairing on this adapter, in both roles, until it is
    /// cleared: as a central (pairing that a read or write of a protected characteristic starts,
    /// or a device asking) and as a peripheral (a central pairing with this adapter's
    /// ``GATTServer`` to use an encrypted characteristic). `nil` clears it.
    ///
    /// Able registers one agent with BlueZ for the whole process and asks BlueZ to make it the
    /// default, so it answers for every adapter of the `bluetoothd`: a request about a device on
    /// an adapter with no standing agent is refused (unless a ``Peripheral/pair(with:timeout:)``
    /// is under way, whose agent answers it). BlueZ keeps one capability for all of them: the one
    /// of the agent set (or pairing started) last. The agent is unregistered when the last one is
    /// cleared; an adapter that goes away (or a `bluetoothd` that stops) drops its agent, which
    /// must be set again when it returns. Only `bluetoothd` may call the agent; calls from other
    /// processes are refused.
    ///
    /// BlueZ waits for each of the agent's answers for up to a minute (`REQUEST_TIMEOUT` in
    /// BlueZ's `src/agent.c`), then fails that pairing.
    ///
    /// The corresponding BlueZ methods are `org.bluez.AgentManager1.RegisterAgent`,
    /// `RequestDefaultAgent` and `UnregisterAgent`; the agent answers `org.bluez.Agent1`.
    /// - Parameter agent: The agent, or `nil` to clear it.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/adapterRemoved`` when the adapter is
    ///   gone, ``BluetoothError/Code/unsupported`` on a backend without agents, or what BlueZ
    ///   answered (nothing changes then).
    public func setPairingAgent(_ agent: PairingAgent?) async throws {
        try await pairingAgentBackend().setPairingAgent(agent)
    }

    /// Sets `agent` as the adapter's standing pairing agent while `body` runs, then restores the
    /// agent set before (or none), whatever `body` does.
    ///
    /// See ``setPairingAgent(_:)`` for what the agent answers. `body` runs where the caller is.
    ///
    /// ```swift
    /// // Pair with a device to read its protected characteristic, accepting Just Works.
    /// let level = try await adapter.withPairingAgent(.justWorks) {
    ///     try await peripheral.read(Characteristics.batteryLevel)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - agent: The agent that answers pairing while `body` runs.
    ///   - isolation: Where `body` runs; the caller's actor by default.
    ///   - body: What to do while the agent answers.
    /// - Returns: What `body` returned.
    /// - Throws: What setting the agent or `body` throws.
    /// - Important: The previous agent is restored even when the task is cancelled.
    public func withPairingAgent<T>(
        _ agent: PairingAgent, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> sending T
    ) async throws -> sending T {
        let backend = try await pairingAgentBackend()
        let previous = backend.pairingAgent
        try await backend.setPairingAgent(agent)
        do {
            let result = try await body()
            await runEvenIfCancelled { try? await backend.setPairingAgent(previous) }
            return result
        } catch {
            await runEvenIfCancelled { try? await backend.setPairingAgent(previous) }
            throw error
        }
    }

    private func pairingAgentBackend() throws -> any PairingAgentBackend {
        guard let backend = backend as? any PairingAgentBackend else {
            throw BluetoothError(.unsupported, message: "this backend has no pairing agents")
        }
        return backend
    }
}
