import Able
import AbleDBus
import AbleStreams
import Synchronization

/// Fans BlueZ's notifications out to Able's streams: one `StartNotify` per characteristic,
/// whatever the number of streams, and `StopNotify` when the last stream ends. Values go from
/// the connection's dispatch straight into the streams: the object tree's subscription to
/// BlueZ's signals hands each characteristic's `PropertiesChanged` to its fan-out first.
final class BlueZNotificationHub: Sendable {
    /// The streams of one characteristic; touched on the hot path, so a lock and no actor.
    final class Fanout: Sendable {
        /// The streams by their ID, in the order they were added.
        private let consumers = Lock<[(id: UInt64, stream: NotificationStream.Continuation)]>([])

        /// Takes the new `Value` out of the characteristic's `PropertiesChanged`, read in place
        /// (no other argument is decoded); a signal without one, or with a malformed one, is
        /// skipped. Returns whether the signal changed nothing but the value.
        func deliver(_ signal: DBusSignalView) -> Bool {
            guard
                let change = try? signal.changedByteArray(
                    named: "Value", of: BlueZPeripheralBackend.characteristic)
            else { return false }
            if let value = change.bytes {
                // Copying the array under the lock retains its storage; it allocates nothing.
                for consumer in consumers.withLock({ $0 }) { consumer.stream.yieldBytes(value) }
            }
            return change.isOnlyChange
        }

        func add(_ stream: NotificationStream.Continuation, id: UInt64) {
            consumers.withLock { $0.append((id, stream)) }
        }

        /// Removes a stream; returns whether none is left.
        func remove(_ id: UInt64) -> Bool {
            consumers.withLock { consumers in
                consumers.removeAll { $0.id == id }
                return consumers.isEmpty
            }
        }

        func finishAll(throwing error: any Error) {
            for consumer in consumers.withLock({ consumers in
                defer { consumers.removeAll() }
                return consumers
            }) {
                consumer.stream.finish(throwing: error)
            }
        }
    }

    private struct Entry {
        let fanout: Fanout
        /// Ends the fan-out's place in the object tree.
        let stopReceiving: @Sendable () -> Void
        let watcher: Task<Void, Never>
    }

    private let entries = Lock<[DBusObjectPath: Entry]>([:])
    private let nextID = Atomic<UInt64>(0)
    private let queue = FIFOLock()

    /// Adds a stream to a characteristic's notifications, starting them in BlueZ if it is the first.
    func add(
        _ continuation: NotificationStream.Continuation, for characteristic: DBusObjectPath, device: DBusObjectPath,
        system: BlueZSystem
    ) async throws {
        let id = nextID.add(1, ordering: .relaxed).newValue
        try await queue.withLock { [self] in
            if let entry = entries.withLock({ $0[characteristic] }) {
                entry.fanout.add(continuation, id: id)
                return
            }
            let fanout = Fanout()
            fanout.add(continuation, id: id)
            // Attach before StartNotify, so the first value is not lost.
            let stopReceiving = system.tree.receiveValues(
                of: characteristic, deliver: fanout.deliver,
                onConnectionLost: { error in
                    fanout.finishAll(
                        throwing: BluetoothError(
                            .daemonUnavailable, message: "the bus connection was lost", cause: error))
                })
            // Followed from before StartNotify, so that the characteristic or its device going
            // away while BlueZ answers is seen too.
            let changes = system.tree.changes()
            do {
                _ = try await system.call(characteristic, BlueZPeripheralBackend.characteristic, "StartNotify")
            } catch {
                stopReceiving()
                // BlueZ may have started notifying although the answer never reached us (the task
                // was cancelled while waiting, or the call timed out): stop it, from a task that
                // is not cancelled. Refused StartNotify calls make this a harmless error.
                await system.callEvenIfCancelled(characteristic, BlueZPeripheralBackend.characteristic, "StopNotify")
                throw error
            }
            let watcher = Task { [tree = system.tree] in
                // Gone already (removed while StartNotify was answered, before any value), or when
                // BlueZ says so.
                let isGone =
                    tree.interfaces(at: characteristic) == nil
                    || (try? tree.properties(of: BlueZPeripheralBackend.device, at: device)?.decode(
                        "Connected", as: Bool.self)) == false
                if !isGone {
                    for await change in changes {
                        if case .interfacesRemoved(characteristic, _) = change { break }
                        if case .propertiesChanged(device, BlueZPeripheralBackend.device, let changed, _) = change,
                            (try? changed.decode("Connected", as: Bool.self)) == false
                        {
                            break
                        }
                    }
                }
                guard !Task.isCancelled else { return }
                fanout.finishAll(throwing: BluetoothError(.disconnected, message: "the peripheral disconnected"))
            }
            entries.withLock {
                $0[characteristic] = Entry(fanout: fanout, stopReceiving: stopReceiving, watcher: watcher)
            }
        }
        continuation.onTermination { [self] in
            // Queued at once, so a disconnect that follows finds it ahead in line.
            queue.submit { await self.remove(id, from: characteristic, system: system) }
        }
    }

    private func remove(_ id: UInt64, from characteristic: DBusObjectPath, system: BlueZSystem) async {
        guard let entry = entries.withLock({ $0[characteristic] }) else { return }
        guard entry.fanout.remove(id) else { return }
        entries.withLock { $0[characteristic] = nil }
        entry.stopReceiving()
        entry.watcher.cancel()
        _ = try? await system.call(characteristic, BlueZPeripheralBackend.characteristic, "StopNotify")
    }

    /// Waits until the subscriptions ended so far have been stopped in BlueZ.
    func drain() async {
        await queue.drain()
    }
}
