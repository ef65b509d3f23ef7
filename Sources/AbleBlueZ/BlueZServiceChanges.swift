import AbleCore
import AbleDBus
import AbleIO

extension BlueZPeripheralBackend {
    /// How long the device's GATT objects must be quiet before a change is reported: BlueZ
    /// announces each service, characteristic and descriptor object in a signal of its own.
    static let serviceSettleTime = Duration.milliseconds(250)

    /// Follows the device's GATT objects in the tree.
    ///
    /// Seen in the guest, the same on BlueZ 5.66 and 5.82: a server's `bluetoothd` sends a
    /// Service Changed indication for the handle range of an application it unregisters, and
    /// another for the range of one it registers (at new handles: freed ones are not reused at
    /// once). The central's `bluetoothd` (`src/shared/gatt-client.c`) confirms, discovers the
    /// range again, reads the Database Hash, then unexports the objects of the services that
    /// disappeared (dropping their notification sessions) or exports the new ones.
    /// `ServicesResolved` stays true throughout; it goes false and true again only across a
    /// reconnection.
    func serviceChanges() -> AsyncStream<ServiceChange> {
        let (stream, continuation) = AsyncStream<ServiceChange>.makeStream(bufferingPolicy: .bufferingNewest(32))
        let changes = system.tree.changes()
        let known = Lock<[RemoteService]?>(resolvedServices())
        let adapter = path.parent
        let task = Task { [self] in
            var pending: Task<Void, Never>?
            for await change in changes {
                if case .serviceLeft = change { break }
                if case .interfacesRemoved(let removed, let interfaces) = change, removed == adapter,
                    interfaces.contains(BlueZAdapterBackend.interface)
                {
                    break
                }
                guard affectsServices(change) else { continue }
                pending?.cancel()
                pending = Task { [self] in
                    guard (try? await Task.sleep(for: Self.serviceSettleTime)) != nil else { return }
                    guard let now = resolvedServices() else { return }
                    known.withLock { previous in
                        guard let before = previous else {
                            previous = now
                            return
                        }
                        guard let serviceChange = ServiceChange(from: before, to: now) else { return }
                        previous = now
                        continuation.yield(serviceChange)
                    }
                }
            }
            pending?.cancel()
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// The services while connected with the services resolved; `nil` otherwise.
    private func resolvedServices() -> [RemoteService]? {
        guard isConnected,
            (try? system.tree.properties(of: Self.device, at: path)?.decode("ServicesResolved", as: Bool.self))
                == true
        else { return nil }
        return try? services()
    }

    private func affectsServices(_ change: ObjectTreeChange) -> Bool {
        switch change {
        case .interfacesAdded(let object, let interfaces):
            object.isDescendant(of: path, includingSelf: false)
                && interfaces.keys.contains { [Self.service, Self.characteristic, Self.descriptor].contains($0) }
        case .interfacesRemoved(let object, let interfaces):
            object.isDescendant(of: path, includingSelf: false)
                && interfaces.contains { [Self.service, Self.characteristic, Self.descriptor].contains($0) }
        case .propertiesChanged(path, Self.device, let changed, _):
            changed["ServicesResolved"] != nil
        default:
            false
        }
    }
}
