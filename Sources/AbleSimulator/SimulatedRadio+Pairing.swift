import AbleCore
import AbleIO

/// How two devices pair, from their capabilities: LE Secure Connections' association models
/// (Core 5.3 Vol 3 Part H 2.3.5.1, the table of IO capabilities against each other).
enum SimulatedPairingMethod: Equatable {
    /// Nothing to compare; the responder's agent is asked to authorize. Keys are not authenticated.
    case justWorks
    /// Both sides show the same number and confirm it.
    case numericComparison
    /// One side shows a passkey the other types (both type it when neither has a display).
    case passkeyEntry

    init(initiator: PairingAgent.Capability, responder: PairingAgent.Capability) {
        let yesNo: Set<PairingAgent.Capability> = [.displayYesNo, .keyboardDisplay]
        let keyboard: Set<PairingAgent.Capability> = [.keyboardOnly, .keyboardDisplay]
        if initiator == .noInputNoOutput || responder == .noInputNoOutput {
            self = .justWorks
        } else if yesNo.contains(initiator) && yesNo.contains(responder) {
            self = .numericComparison
        } else if !keyboard.contains(initiator) && !keyboard.contains(responder) {
            self = .justWorks
        } else {
            self = .passkeyEntry
        }
    }

    /// Whether the keys it gives are authenticated (man-in-the-middle protection).
    var isAuthenticated: Bool { self != .justWorks }
}

/// The security a link gives, weakest first.
enum SimulatedLinkSecurity: Int, Comparable {
    case none, encrypted, authenticated

    static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// What `permissions` require for `access`: secure (LE Secure Connections) counts as
    /// authenticated, since every simulated pairing uses Secure Connections.
    init(requiredBy permissions: AttributePermissions, for access: SimulatedAccess) {
        let (encrypted, authenticated): (AttributePermissions, AttributePermissions) =
            switch access {
            case .read: (.readEncrypted, [.readEncryptedAuthenticated, .readSecure])
            case .write: (.writeEncrypted, [.writeEncryptedAuthenticated, .writeSecure])
            case .subscribe: (.subscribeEncrypted, [.subscribeEncryptedAuthenticated, .subscribeSecure])
            }
        self =
            !permissions.isDisjoint(with: authenticated)
            ? .authenticated : permissions.isDisjoint(with: encrypted) ? .none : .encrypted
    }
}

/// What a central does to an attribute.
enum SimulatedAccess {
    case read, write, subscribe
}

extension SimulatedRadio {
    /// The security of the link between `central` and `peripheral`, from the keys they share.
    func linkSecurity(central: BluetoothAddress, peripheral: BluetoothAddress) -> SimulatedLinkSecurity {
        state.withLock { state in
            guard let device = state.devices[peripheral], device.paired.contains(central) else { return .none }
            return device.authenticated.contains(central) ? .authenticated : .encrypted
        }
    }

    /// Pairs `central` with `peripheral` as SMP does, asking the agents what the method needs.
    ///
    /// The radio plays one `bluetoothd` serving one process's adapters. The central is answered by
    /// `initiator` (a ``Peripheral/pair(with:timeout:)``'s agent, asked only about `peripheral`),
    /// or else (a pairing the stack started by itself) by its adapter's standing agent, when some
    /// standing agent of the radio is the system's default. A peripheral that is an adapter of this
    /// radio is asked about `central`, another device than the one `initiator` pairs with: only its
    /// standing agent answers, and only while some standing agent is the system's default, as
    /// `bluetoothd` asks only its default agent about pairings it did not start for that process;
    /// otherwise it refuses, as `bluetoothd` does with no agent. A simulated peripheral has no input
    /// or output and accepts (Just Works).
    ///
    /// - Returns: Whether the keys are authenticated.
    /// - Throws: ``BluetoothError/Code/authenticationRejected`` when an agent refused or gave a
    ///   wrong passkey, as BlueZ reports it.
    @discardableResult
    func pair(
        central: BluetoothAddress, peripheral: BluetoothAddress, initiator: PairingAgent?,
        needsAuthentication: Bool = false
    ) async throws -> Bool {
        let (centralAgent, responder, isAdapter, passkey) = state.withLock { state in
            let isAdapter = state.adapters[peripheral] != nil
            let isDefault = state.adapters.values.contains { $0.pairingAgent != nil && $0.pairingAgentIsSystemDefault }
            let responder = isAdapter && isDefault ? state.adapters[peripheral]?.pairingAgent : nil
            // Six digits, different for each pairing.
            let passkey = UInt32(truncatingIfNeeded: (state.makeID() &* 480_209) % 1_000_000)
            let standing = isDefault ? state.adapters[central]?.pairingAgent : nil
            return (initiator ?? standing, responder, isAdapter, passkey)
        }
        let method = SimulatedPairingMethod(
            initiator: centralAgent?.capability ?? .noInputNoOutput,
            responder: responder?.capability ?? .noInputNoOutput)
        let rejected = BluetoothError(.authenticationRejected, message: "Authentication Rejected")
        // As the kernel's SMP: a pairing that must be authenticated fails before anyone is asked
        // when the capabilities allow only Just Works (Authentication Requirements).
        if needsAuthentication && !method.isAuthenticated {
            throw BluetoothError(.authenticationFailed, message: "Authentication Failed")
        }
        switch method {
        case .justWorks:
            // The initiator's side accepts on its own; the responder's agent authorizes.
            if isAdapter {
                guard let responder, await responder.confirm(central, 0) else { throw rejected }
            }
        case .numericComparison:
            guard let centralAgent, let responder else { throw rejected }
            guard await centralAgent.confirm(peripheral, passkey), await responder.confirm(central, passkey) else {
                throw rejected
            }
        case .passkeyEntry:
            guard let centralAgent, let responder else { throw rejected }
            let sides = [(centralAgent, peripheral), (responder, central)]
            let typing = sides.filter { agent, _ in [.keyboardOnly, .keyboardDisplay].contains(agent.capability) }
            if typing.count == 2 && typing.allSatisfy({ $0.0.capability == .keyboardOnly }) {
                // Neither shows a passkey: the users type the same one on both.
                let typed = [await centralAgent.passkey(peripheral), await responder.passkey(central)]
                guard let first = typed[0], typed[1] == first else { throw rejected }
            } else {
                // The side with a display and no keyboard shows it (the keyboard-display side
                // when the other has only a keyboard); the other types it.
                let showing =
                    sides.first { agent, _ in [.displayOnly, .displayYesNo].contains(agent.capability) }
                    ?? sides.first { agent, _ in agent.capability == .keyboardDisplay }!
                let typist = sides.first { $0.1 != showing.1 }!
                await showing.0.display(showing.1, passkey)
                guard await typist.0.passkey(typist.1) == passkey else { throw rejected }
            }
        }
        remember(peripheral, by: central)
        state.withLock { state in
            state.devices[peripheral]?.paired.insert(central)
            if method.isAuthenticated {
                state.devices[peripheral]?.authenticated.insert(central)
            } else {
                state.devices[peripheral]?.authenticated.remove(central)
            }
        }
        return method.isAuthenticated
    }

    /// Raises the link's security to what `access` to an attribute with `permissions` needs, as
    /// BlueZ's GATT client does when a server answers Insufficient Encryption or Authentication:
    /// it pairs (asking the central adapter's standing agent) and tries again.
    ///
    /// - Throws: ``BluetoothError/Code/disconnected`` when pairing fails, or must be authenticated
    ///   and cannot be (the link is dropped, as the kernel does); `NotPermitted` ("Not paired", as
    ///   BlueZ reports Insufficient Authentication) when the new keys are still too weak.
    func secure(
        _ access: SimulatedAccess, to permissions: AttributePermissions, central: BluetoothAddress,
        peripheral: BluetoothAddress
    ) async throws {
        let required = SimulatedLinkSecurity(requiredBy: permissions, for: access)
        let security = linkSecurity(central: central, peripheral: peripheral)
        guard security < required else { return }
        // As BlueZ 5.82's ATT layer (`change_security` and `handle_error_rsp` in
        // `src/shared/att.c`): one raise per request, encryption first with whatever keys the
        // capabilities give, or from an encrypted link pairing that must be authenticated; then the
        // retried request's answer stands.
        try await pairOrDropLink(central: central, peripheral: peripheral, needsAuthentication: security == .encrypted)
        guard linkSecurity(central: central, peripheral: peripheral) >= required else {
            throw BluetoothError.asGATTClientReports(
                required == .authenticated ? .insufficientAuthentication : .insufficientEncryption)
        }
    }

    private func pairOrDropLink(
        central: BluetoothAddress, peripheral: BluetoothAddress, needsAuthentication: Bool
    ) async throws {
        do {
            try await pair(
                central: central, peripheral: peripheral, initiator: nil, needsAuthentication: needsAuthentication)
        } catch {
            // As the kernel does when SMP fails, the link drops (Authentication Failure), and
            // BlueZ fails the request it was retrying as a link loss.
            disconnect(
                central: central, peripheral: peripheral,
                reason: BluetoothError(.authenticationFailed, message: "pairing failed: Authentication Failure"))
            throw BluetoothError(
                .disconnected, message: "\(peripheral) disconnected during the request: pairing failed", cause: error)
        }
    }
}

extension GATTServerCore {
    /// The permissions of the characteristic or descriptor `id` names; `nil` when the definition
    /// has no such attribute (the operation then fails with its own error).
    func permissions(of id: AttributeID) -> AttributePermissions? {
        let services = definition.services
        guard services.indices.contains(id.service),
            services[id.service].characteristics.indices.contains(id.characteristic)
        else { return nil }
        let characteristic = services[id.service].characteristics[id.characteristic]
        guard let descriptor = id.descriptor else { return characteristic.permissions }
        return characteristic.descriptors.indices.contains(descriptor)
            ? characteristic.descriptors[descriptor].permissions : nil
    }
}

extension SimulatedAdapterBackend: PairingAgentBackend {
    var pairingAgent: PairingAgent? { radio.state.withLock { $0.adapters[address]?.pairingAgent } }

    var pairingAgentIsSystemDefault: Bool {
        radio.state.withLock { $0.adapters[address]?.pairingAgentIsSystemDefault ?? false }
    }

    /// Sets the adapter's standing agent; a removed adapter's agent goes with it, as on BlueZ.
    func setPairingAgent(_ agent: PairingAgent?, asSystemDefault: Bool) async throws {
        try radio.state.withLock { state in
            guard state.adapters[address] != nil else {
                if agent == nil { return }
                throw state.absence(of: address, "adapter \(name) was removed")
            }
            state.adapters[address]?.pairingAgent = agent
            state.adapters[address]?.pairingAgentIsSystemDefault = agent != nil && asSystemDefault
        }
    }
}
