import Able
import AbleDBus

/// A `org.bluez.Agent1` object answering BlueZ's pairing requests with a ``PairingAgent``.
///
/// Only `bluetoothd` may call it: calls from any other bus name are refused.
enum BlueZAgent {
    /// Registers `agent` as BlueZ's default agent for the duration of `body`.
    static func withAgent<T: Sendable>(
        _ agent: PairingAgent, system: BlueZSystem, _ body: () async throws -> T
    ) async throws -> T {
        let path = DBusObjectPath.unique("/able/agent/a")
        let bluez = try await system.connection.nameOwner(of: BlueZSystem.service)
        try await system.connection.export(
            [interface(agent)], at: path, authorize: { sender in sender == bluez })
        do {
            _ = try await system.call(
                "/org/bluez", "org.bluez.AgentManager1", "RegisterAgent",
                [
                    .objectPath(path), .string(agent.capability.rawValue),
                ])
            _ = try await system.call(
                "/org/bluez", "org.bluez.AgentManager1", "RequestDefaultAgent", [.objectPath(path)])
        } catch {
            await system.connection.unexport(path)
            throw error
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        await system.callEvenIfCancelled(
            "/org/bluez", "org.bluez.AgentManager1", "UnregisterAgent", [.objectPath(path)])
        await system.connection.unexport(path)
        return try result.get()
    }

    static func interface(_ agent: PairingAgent) -> DBusInterface {
        @Sendable func device(_ call: DBusMethodCall) throws -> BluetoothAddress {
            let path = try call.argument(0, as: DBusObjectPath.self)
            guard let address = BluetoothAddress(bluezPathComponent: path.lastElement) else {
                throw DBusError("org.bluez.Error.Rejected", "unknown device \(path)")
            }
            return address
        }
        let rejected = DBusError("org.bluez.Error.Rejected", "refused by the Able pairing agent")
        return DBusInterface(
            "org.bluez.Agent1",
            methods: [
                DBusMethod("Release") { _ in [] },
                DBusMethod("Cancel") { _ in [] },
                DBusMethod("RequestConfirmation", in: "ou") { call in
                    guard await agent.confirm(try device(call), try call.argument(1)) else { throw rejected }
                    return []
                },
                DBusMethod("RequestAuthorization", in: "o") { call in
                    guard await agent.confirm(try device(call), 0) else { throw rejected }
                    return []
                },
                DBusMethod("AuthorizeService", in: "os") { _ in [] },
                DBusMethod("RequestPasskey", in: "o", out: "u") { call in
                    guard let passkey = await agent.passkey(try device(call)) else { throw rejected }
                    return [.uint32(passkey)]
                },
                DBusMethod("RequestPinCode", in: "o", out: "s") { call in
                    guard let passkey = await agent.passkey(try device(call)) else { throw rejected }
                    return [.string(String(passkey))]
                },
                DBusMethod("DisplayPasskey", in: "ouq") { call in
                    await agent.display(try device(call), try call.argument(1))
                    return []
                },
                DBusMethod("DisplayPinCode", in: "os") { call in
                    await agent.display(try device(call), UInt32(try call.argument(1, as: String.self)) ?? 0)
                    return []
                },
            ])
    }
}
