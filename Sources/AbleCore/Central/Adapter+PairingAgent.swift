/// What a backend provides for an adapter's standing pairing agent.
package protocol PairingAgentBackend: AdapterBackend {
    /// The standing agent set now, if any.
    var pairingAgent: PairingAgent? { get }
    /// Whether the standing agent set now asked to be the system's default agent.
    var pairingAgentIsSystemDefault: Bool { get }
    /// Sets the standing agent, or clears it with `nil`.
    func setPairingAgent(_ agent: PairingAgent?, asSystemDefault: Bool) async throws
}

extension Adapter {
    /// The agent that answers pairing on this adapter while no ``Peripheral/pair(with:timeout:)``
    /// is under way with the device asking, or `nil` when none is set.
    public nonisolated var pairingAgent: PairingAgent? { (backend as? any PairingAgentBackend)?.pairingAgent }

    /// Sets the agent that answers pairing on this adapter until it is cleared, in both roles: as
    /// a central (pairing that a read or write of a protected characteristic starts, or a device
    /// asking) and as a peripheral (a central pairing with this adapter's ``GATTServer`` to use an
    /// encrypted characteristic). `nil` clears it.
    ///
    /// The standing agent answers what no ``Peripheral/pair(with:timeout:)`` under way answers: a
    /// pairing's agent is asked only about the device it pairs with, so a request about any other
    /// device goes to the standing agent of that device's adapter, and so does every
    /// ``PairingAgent/authorizeService`` question. With no standing agent on that adapter, Able
    /// refuses (`org.bluez.Error.Rejected`).
    ///
    /// BlueZ sends an agent only the requests of pairings its own process starts, unless the agent
    /// is the system's default agent: then it also gets those BlueZ starts by itself (a read of a
    /// protected characteristic raising the link's security, a central pairing with this adapter)
    /// for every adapter of the `bluetoothd`, in place of any other program's agent (a desktop's
    /// Bluetooth settings, `bluetoothctl`). Able asks to be the default agent only while a standing
    /// agent set with `asSystemDefault: true` is set, on any adapter. The simulator follows the same
    /// rules: without a default standing agent, an adapter's pairings that its own process did not
    /// start are refused.
    ///
    /// Able registers one agent with BlueZ for the whole process, so BlueZ keeps one capability for
    /// all adapters: the one of the agent set (or pairing started) last. The agent is unregistered
    /// when the last one is cleared; an adapter that goes away (or a `bluetoothd` that stops) drops
    /// its agent, which must be set again when it returns. Only `bluetoothd` may call the agent;
    /// calls from other processes are refused.
    ///
    /// BlueZ waits for each of the agent's answers for up to a minute (`REQUEST_TIMEOUT` in
    /// BlueZ's `src/agent.c`), then fails that pairing.
    ///
    /// The corresponding BlueZ methods are `org.bluez.AgentManager1.RegisterAgent`,
    /// `RequestDefaultAgent` and `UnregisterAgent`; the agent answers `org.bluez.Agent1`.
    /// - Parameters:
    ///   - agent: The agent, or `nil` to clear it.
    ///   - asSystemDefault: Whether Able becomes the system's default agent while this agent is
    ///     set (`RequestDefaultAgent`), to answer the pairings BlueZ starts by itself; by default
    ///     it does not.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/adapterRemoved`` when the adapter is
    ///   gone, ``BluetoothError/Code/unsupported`` on a backend without agents, or what BlueZ
    ///   answered (nothing changes then).
    public func setPairingAgent(_ agent: PairingAgent?, asSystemDefault: Bool = false) async throws {
        try await pairingAgentBackend().setPairingAgent(agent, asSystemDefault: asSystemDefault)
    }

    /// Sets `agent` as the adapter's standing pairing agent while `body` runs, then restores the
    /// agent set before (or none), whatever `body` does.
    ///
    /// See ``setPairingAgent(_:asSystemDefault:)`` for what the agent answers. `body` runs where
    /// the caller is.
    ///
    /// ```swift
    /// // Pair with a device to read its protected characteristic, accepting Just Works.
    /// let level = try await adapter.withPairingAgent(.justWorks, asSystemDefault: true) {
    ///     try await peripheral.read(Characteristics.batteryLevel)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - agent: The agent that answers pairing while `body` runs.
    ///   - asSystemDefault: Whether Able becomes the system's default agent meanwhile; see
    ///     ``setPairingAgent(_:asSystemDefault:)``.
    ///   - isolation: Where `body` runs; the caller's actor by default.
    ///   - body: What to do while the agent answers.
    /// - Returns: What `body` returned.
    /// - Throws: What setting the agent or `body` throws.
    /// - Important: The previous agent is restored even when the task is cancelled.
    public func withPairingAgent<T>(
        _ agent: PairingAgent, asSystemDefault: Bool = false, isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> sending T
    ) async throws -> sending T {
        let backend = try await pairingAgentBackend()
        let previous = (backend.pairingAgent, backend.pairingAgentIsSystemDefault)
        try await backend.setPairingAgent(agent, asSystemDefault: asSystemDefault)
        do {
            let result = try await body()
            await runEvenIfCancelled { try? await backend.setPairingAgent(previous.0, asSystemDefault: previous.1) }
            return result
        } catch {
            await runEvenIfCancelled { try? await backend.setPairingAgent(previous.0, asSystemDefault: previous.1) }
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
