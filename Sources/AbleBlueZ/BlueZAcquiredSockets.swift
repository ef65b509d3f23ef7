import AbleCore
import AbleDBus

extension BlueZPeripheralBackend {
    /// The reasons BlueZ gives for refusing a socket that stay true for the connection: the
    /// characteristic lacks the property, or this BlueZ has no such method.
    static func refusesForGood(_ error: BluetoothError) -> Bool {
        error.code == .notSupported || error.code == .notAuthorized || error.code == .doesNotExist
    }

    func writeSocket(for characteristic: RemoteCharacteristic) async throws -> AcquiredSocket? {
        guard characteristic.properties.contains(.writeWithoutResponse) else { return nil }
        // The table is looked up by the path the handles name, unchecked: an open socket or a
        // remembered refusal is found without reading the tree (a write over the bus checks the
        // object itself). Only an acquisition checks that the object is still this
        // characteristic.
        guard let key = characteristic.id.path(device: path) else { return nil }
        return try await system.writeSockets.socket(for: key) { () async throws -> AcquiredSocketTable.Acquisition in
            let path = try objectPath(characteristic)
            do {
                let (descriptor, mtu) = try await Self.acquire("AcquireWrite", path, system: system)
                return .acquired(try AcquiredSocket(socket: descriptor, attMTU: mtu))
            } catch let error as BluetoothError where error.code == .notPermitted {
                // Another client holds it: write over the bus (which BlueZ refuses as long as it does).
                return .refused(remember: false)
            } catch let error as BluetoothError where Self.refusesForGood(error) {
                return .refused(remember: true)
            }
        }
    }

    func releaseWriteSocket(for characteristic: RemoteCharacteristic) async {
        guard let path = characteristic.id.path(device: path), system.writeSockets.openSocket(for: path) != nil
        else { return }
        // Listen first, so that BlueZ's WriteAcquired = false is not missed.
        let changes = system.tree.changes()
        await system.writeSockets.release(path)
        // BlueZ learns of the release when it sees the hang-up; until then it refuses writes.
        _ = try? await withTimeLimit(.seconds(1)) { [self] in
            if !isWriteAcquired(path) { return }
            for await _ in changes where !isWriteAcquired(path) { return }
        }
    }

    private func isWriteAcquired(_ path: DBusObjectPath) -> Bool {
        (try? system.tree.properties(of: Self.characteristic, at: path)?.decode("WriteAcquired", as: Bool.self))
            == true
    }

    /// Calls `AcquireWrite` or `AcquireNotify` and takes the descriptor it answers with.
    ///
    /// - Returns: The descriptor, the caller's to close, and the link's ATT MTU.
    static func acquire(_ method: String, _ path: DBusObjectPath, system: BlueZSystem) async throws -> (CInt, Int) {
        let reply = try await system.call(
            path, characteristic, method, [.dictionary(key: .string, value: .variant, [])])
        guard reply.count == 2, case .unixFD(let descriptor) = reply[0], case .uint16(let mtu) = reply[1],
            let fd = descriptor.take()
        else {
            throw BluetoothError(.protocolError, message: "\(method) answered \(reply), not a descriptor and an MTU")
        }
        return (fd, Int(mtu))
    }

    /// Releases the sockets of this device's characteristics, and forgets BlueZ's refusals.
    func releaseSockets() async {
        let device = path
        await system.writeSockets.forget { $0.parent?.parent == device }
    }
}
