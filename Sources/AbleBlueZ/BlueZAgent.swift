import AbleCore
import AbleDBus
import AbleIO

/// The process's one `org.bluez.Agent1` object, answering BlueZ's pairing requests with the
/// ``PairingAgent``s Able was given: the standing agents set on adapters
/// (``Adapter/setPairingAgent(_:asSystemDefault:)``) and the agents of pairings under way
/// (``Peripheral/pair(with:timeout:)``).
///
/// BlueZ keeps one agent per D-Bus connection (`agent.c` refuses a second `RegisterAgent` from a
/// sender with `AlreadyExists`) and one default agent per `bluetoothd`, whose capability sets the
/// IO capability of every adapter. So Able registers one object, with the capability of the agent
/// that asked last (a pairing under way before the standing agents), registers it again when
/// that capability changes or when it must become, or stop being, the default agent
/// (`RequestDefaultAgent`, only while a standing agent set as the system's default is set; BlueZ
/// has no call to stop being the default but `UnregisterAgent`), and unregisters it when no agent
/// is left.
///
/// A request is answered by the agent of the pairing under way with that device, else by the
/// standing agent of the device's adapter; with neither, it is refused. A pairing's agent never
/// answers for another device: between two adapters of one `bluetoothd`, the other side's request
/// (about this adapter's address, on the other adapter) is the other adapter's standing agent's
/// to answer. `AuthorizeService` goes to the standing agent only. Only `bluetoothd` may call the
/// object: calls from any other bus name are refused.
final class BlueZAgentRegistry: Sendable {
    private struct State {
        /// The standing agents, by adapter name, each with the order it was set in and whether
        /// it asked for the system's default agent.
        var standing: [String: (agent: PairingAgent, order: UInt64, isSystemDefault: Bool)] = [:]
        /// The agents of pairings under way, by a key of their own.
        var pairings: [UInt64: (device: DBusObjectPath, agent: PairingAgent)] = [:]
        var nextOrder: UInt64 = 0
        /// The capability BlueZ has the object registered with, and whether it is the default
        /// agent; `nil` when not registered.
        var registered: Registration?
        /// The exported object's path; `nil` when not exported.
        var exported: DBusObjectPath?
        /// Follows the adapters with a standing agent, to drop the agents of those that go.
        var watcher: Task<Void, Never>?

        mutating func order() -> UInt64 {
            nextOrder += 1
            return nextOrder
        }

        /// The registration wanted: the newest pairing's agent's capability, else the newest
        /// standing agent's; the default agent while any standing agent asked for it.
        var desired: Registration? {
            let isDefault = standing.values.contains { $0.isSystemDefault }
            if let newest = pairings.max(by: { $0.key < $1.key }) {
                return Registration(capability: newest.value.agent.capability, isDefault: isDefault)
            }
            return standing.values.max(by: { $0.order < $1.order }).map {
                Registration(capability: $0.agent.capability, isDefault: isDefault)
            }
        }

        /// Who answers a request about `device`: the pairing under way with it, else the standing
        /// agent of its adapter.
        func agent(for device: DBusObjectPath) -> PairingAgent? {
            if let pairing = pairings.filter({ $0.value.device == device }).max(by: { $0.key < $1.key }) {
                return pairing.value.agent
            }
            return standingAgent(for: device)
        }

        func standingAgent(for device: DBusObjectPath) -> PairingAgent? {
            device.parent.flatMap { standing[$0.lastElement]?.agent }
        }
    }

    struct Registration: Equatable {
        var capability: PairingAgent.Capability
        var isDefault: Bool
    }

    private let state = Lock(State())
    /// Registering and unregistering with BlueZ, one change at a time.
    private let serial = FIFOLock()

    /// The standing agent of `adapter`, if one is set.
    func standingAgent(of adapter: String) -> PairingAgent? {
        state.withLock { $0.standing[adapter]?.agent }
    }

    /// Whether the standing agent of `adapter` asked for the system's default agent.
    func standingAgentIsSystemDefault(of adapter: String) -> Bool {
        state.withLock { $0.standing[adapter]?.isSystemDefault ?? false }
    }

    /// Sets or clears the standing agent of `adapter`, registering or unregistering Able's agent
    /// with BlueZ as needed. On failure nothing changes.
    func setStanding(
        _ agent: PairingAgent?, asSystemDefault: Bool = false, of adapter: String, system: BlueZSystem
    ) async throws {
        try await serial.withLock {
            let previous = state.withLock { state in
                let previous = state.standing[adapter]
                if let agent {
                    state.standing[adapter] = (agent, state.order(), asSystemDefault)
                } else {
                    state.standing[adapter] = nil
                }
                return previous
            }
            do {
                try await reconcile(system)
            } catch {
                state.withLock { $0.standing[adapter] = previous }
                try? await reconcile(system)
                throw error
            }
            watchAdapters(system)
        }
    }

    /// Runs `body` with `agent` answering for `device` (and for any request no other agent answers).
    func withPairing<T: Sendable>(
        _ agent: PairingAgent, device: DBusObjectPath, system: BlueZSystem, _ body: () async throws -> T
    ) async throws -> T {
        let key = try await serial.withLock {
            let key = state.withLock { state in
                let key = state.order()
                state.pairings[key] = (device, agent)
                return key
            }
            do {
                try await reconcile(system)
            } catch {
                state.withLock { _ = $0.pairings.removeValue(forKey: key) }
                try? await reconcile(system)
                throw error
            }
            return key
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        await runEvenIfCancelled { [self] in
            _ = try? await serial.withLock {
                state.withLock { _ = $0.pairings.removeValue(forKey: key) }
                try? await reconcile(system)
            }
        }
        return try result.get()
    }

    /// Brings BlueZ's registration in line with the agents set: registers, registers again with
    /// another capability, or unregisters. Runs under ``serial``.
    private func reconcile(_ system: BlueZSystem) async throws {
        let (desired, registered, exported) = state.withLock { ($0.desired, $0.registered, $0.exported) }
        guard desired != registered || (desired == nil && exported != nil) else { return }
        if registered != nil, let exported {
            state.withLock { $0.registered = nil }
            await system.callEvenIfCancelled(
                "/org/bluez", "org.bluez.AgentManager1", "UnregisterAgent", [.objectPath(exported)])
        }
        guard let desired else {
            if let exported { await system.connection.unexport(exported) }
            state.withLock { $0.exported = nil }
            return
        }
        let path: DBusObjectPath
        if let exported {
            path = exported
        } else {
            path = DBusObjectPath.unique("/able/agent/a")
            let tree = system.tree
            try await system.connection.export(
                [interface()], at: path, authorize: { sender in sender == tree.owner })
            state.withLock { $0.exported = path }
        }
        _ = try await system.call(
            "/org/bluez", "org.bluez.AgentManager1", "RegisterAgent",
            [.objectPath(path), .string(desired.capability.rawValue)])
        state.withLock { $0.registered = Registration(capability: desired.capability, isDefault: false) }
        guard desired.isDefault else { return }
        do {
            _ = try await system.call(
                "/org/bluez", "org.bluez.AgentManager1", "RequestDefaultAgent", [.objectPath(path)])
            state.withLock { $0.registered = desired }
        } catch {
            state.withLock { $0.registered = nil }
            await system.callEvenIfCancelled(
                "/org/bluez", "org.bluez.AgentManager1", "UnregisterAgent", [.objectPath(path)])
            throw error
        }
    }

    /// Drops the standing agent of an adapter that goes away (all of them when `bluetoothd`
    /// leaves the bus, which forgets every agent), while any standing agent is set.
    private func watchAdapters(_ system: BlueZSystem) {
        let changes = state.withLock { state -> AsyncStream<ObjectTreeChange>? in
            if state.standing.isEmpty {
                state.watcher?.cancel()
                state.watcher = nil
                return nil
            }
            return state.watcher == nil ? system.tree.changes() : nil
        }
        guard let changes else { return }
        let task = Task { [weak self] in
            for await change in changes {
                let gone: [String]
                switch change {
                case .interfacesRemoved(let path, let interfaces)
                where interfaces.contains(BlueZAdapterBackend.interface):
                    gone = [path.lastElement]
                case .serviceLeft:
                    gone = self?.state.withLock { Array($0.standing.keys) } ?? []
                default:
                    continue
                }
                guard let self, !gone.isEmpty else { continue }
                await self.adaptersWent(gone, system: system)
            }
        }
        state.withLock { $0.watcher = task }
    }

    private func adaptersWent(_ names: [String], system: BlueZSystem) async {
        _ = try? await serial.withLock {
            let dropped = state.withLock { state in
                names.compactMap { state.standing.removeValue(forKey: $0) }.count
            }
            guard dropped > 0 else { return }
            try? await reconcile(system)
            // Ended from within the watcher's own task: that task ends with its loop below.
            state.withLock { state in
                if state.standing.isEmpty {
                    state.watcher?.cancel()
                    state.watcher = nil
                }
            }
        }
    }

    private func interface() -> DBusInterface {
        let registry = self
        @Sendable func request(_ call: DBusMethodCall, standingOnly: Bool = false) throws -> (
            BluetoothAddress, PairingAgent
        ) {
            let path = try call.argument(0, as: DBusObjectPath.self)
            guard let address = BluetoothAddress(bluezDevicePath: path) else {
                throw DBusError("org.bluez.Error.Rejected", "unknown device \(path)")
            }
            guard
                let agent = registry.state.withLock({
                    standingOnly ? $0.standingAgent(for: path) : $0.agent(for: path)
                })
            else {
                throw DBusError("org.bluez.Error.Rejected", "no Able pairing agent answers for \(path)")
            }
            return (address, agent)
        }
        let rejected = DBusError("org.bluez.Error.Rejected", "refused by the Able pairing agent")
        return DBusInterface(
            "org.bluez.Agent1",
            methods: [
                DBusMethod("Release") { _ in [] },
                DBusMethod("Cancel") { _ in [] },
                DBusMethod("RequestConfirmation", in: "ou") { call in
                    let (device, agent) = try request(call)
                    guard await agent.confirm(device, try call.argument(1)) else { throw rejected }
                    return []
                },
                DBusMethod("RequestAuthorization", in: "o") { call in
                    let (device, agent) = try request(call)
                    guard await agent.confirm(device, 0) else { throw rejected }
                    return []
                },
                DBusMethod("AuthorizeService", in: "os") { call in
                    let (device, agent) = try request(call, standingOnly: true)
                    let uuid = try call.argument(1, as: String.self)
                    guard let service = BluetoothUUID(uuid) else {
                        throw DBusError("org.bluez.Error.Rejected", "not a service UUID: \(uuid)")
                    }
                    guard await agent.authorizeService(device, service) else { throw rejected }
                    return []
                },
                DBusMethod("RequestPasskey", in: "o", out: "u") { call in
                    let (device, agent) = try request(call)
                    guard let passkey = await agent.passkey(device) else { throw rejected }
                    return [.uint32(passkey)]
                },
                DBusMethod("RequestPinCode", in: "o", out: "s") { call in
                    let (device, agent) = try request(call)
                    guard let passkey = await agent.passkey(device) else { throw rejected }
                    return [.string(String(passkey))]
                },
                DBusMethod("DisplayPasskey", in: "ouq") { call in
                    let (device, agent) = try request(call)
                    await agent.display(device, try call.argument(1))
                    return []
                },
                DBusMethod("DisplayPinCode", in: "os") { call in
                    let (device, agent) = try request(call)
                    await agent.display(device, UInt32(try call.argument(1, as: String.self)) ?? 0)
                    return []
                },
            ])
    }
}

extension BlueZAdapterBackend: PairingAgentBackend {
    var pairingAgent: PairingAgent? { system.agents.standingAgent(of: name) }

    var pairingAgentIsSystemDefault: Bool { system.agents.standingAgentIsSystemDefault(of: name) }

    func setPairingAgent(_ agent: PairingAgent?, asSystemDefault: Bool) async throws {
        if agent != nil, let absence = system.tree.adapterAbsence(path, "adapter \(name) is not present") {
            throw absence
        }
        try await system.agents.setStanding(agent, asSystemDefault: asSystemDefault, of: name, system: system)
    }
}
