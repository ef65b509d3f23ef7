import AbleCore
import AbleDBus
import AbleIO
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
        /// Counts the changes of `consumers`: bumped under its lock, so that a ``Reader`` sees a
        /// change with one atomic load instead of a lock per value.
        private let generation = Atomic<UInt64>(0)

        /// Hands one source's values to the fan-out's streams: the characteristic's socket, from
        /// its read handler, or its `PropertiesChanged` signals, from the bus connection's event
        /// loop. Either way one thread at a time, one value after the other.
        ///
        /// It keeps its own copy of the streams and takes the fan-out's lock only when they have
        /// changed since (the generation moved): a paced value, alone in its wake-up, otherwise
        /// pays a lock it finds cold. A stream added before a value is read gets it, as with the
        /// lock: the add bumps the generation before it returns. A stream removed while a value is
        /// on its way may still be offered it, and its ended buffer refuses it; the reader lets go
        /// of a removed stream's buffer when the next value comes, or when its source ends.
        ///
        /// Thread safety: its state is touched by the one thread that runs its source at a time;
        /// hence `@unchecked Sendable`, and no exclusivity checks, which every value would pay.
        final class Reader: @unchecked Sendable {
            private let fanout: Fanout
            @exclusivity(unchecked) private var streams: [NotificationStream.Continuation] = []
            /// The stream when `streams` holds just one, which keeps it alive: called through an
            /// unmanaged reference, it is reached without retaining the array and the stream.
            @exclusivity(unchecked) private var onlyStream: Unmanaged<NotificationStream.Continuation>?
            /// The generation `streams` was copied at; none yet.
            @exclusivity(unchecked) private var seen = UInt64.max
            /// Where the bus's values are copied to: the storage of the last one, if no stream
            /// kept it (a socket's values are copied by its receiver, which has storage of its own).
            @exclusivity(unchecked) private var storage = ByteStorage()

            init(_ fanout: Fanout) { self.fanout = fanout }

            /// Hands a value to every stream.
            func yield(_ value: [UInt8]) {
                if fanout.generation.load(ordering: .acquiring) != seen {
                    (streams, seen) = fanout.snapshot()
                    onlyStream = streams.count == 1 ? Unmanaged.passUnretained(streams[0]) : nil
                }
                if let onlyStream {
                    onlyStream._withUnsafeGuaranteedRef { _ = $0.yieldBytes(value) }
                } else {
                    for stream in streams { stream.yieldBytes(value) }
                }
            }

            /// Takes the new `Value` out of the characteristic's `PropertiesChanged`, read in place
            /// (no other argument is decoded), and hands it to every stream; a signal without one,
            /// or with a malformed one, is skipped. Returns whether the signal changed nothing but
            /// the value.
            func deliver(_ signal: DBusSignalView) -> Bool {
                // Taken apart at once: a tuple kept whole would hold the value too, and the
                // storage could never be used again.
                guard
                    let (bytes, isOnlyChange) = try? signal.changedByteArray(
                        named: "Value", of: BlueZPeripheralBackend.characteristic, storage: &storage)
                else { return false }
                if let bytes {
                    yield(bytes)
                    storage.recycle(bytes)
                }
                return isOnlyChange
            }
        }

        /// The streams and the generation they are at.
        private func snapshot() -> ([NotificationStream.Continuation], UInt64) {
            consumers.withLock { ($0.map(\.stream), generation.load(ordering: .relaxed)) }
        }

        func add(_ stream: NotificationStream.Continuation, id: UInt64) {
            consumers.withLock {
                $0.append((id, stream))
                generation.add(1, ordering: .releasing)
            }
        }

        /// Removes a stream; returns whether none is left.
        func remove(_ id: UInt64) -> Bool {
            consumers.withLock { consumers in
                consumers.removeAll { $0.id == id }
                generation.add(1, ordering: .releasing)
                return consumers.isEmpty
            }
        }

        /// Whether any stream is left.
        var hasConsumers: Bool { consumers.withLock { !$0.isEmpty } }

        func finishAll(throwing error: any Error) {
            for consumer in consumers.withLock({ consumers in
                defer {
                    consumers.removeAll()
                    generation.add(1, ordering: .releasing)
                }
                return consumers
            }) {
                consumer.stream.finish(throwing: error)
            }
        }
    }

    /// Whether a new subscription asks BlueZ for the characteristic's socket (`AcquireNotify`).
    enum SocketChoice {
        case never
        /// The socket if BlueZ grants it, the bus if it refuses.
        case preferred
        /// The socket, or BlueZ's refusal.
        case required
    }

    private struct Entry {
        let fanout: Fanout
        /// The acquired socket the values come from, if they do not come from the bus.
        let socket: AcquiredSocket?
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
        system: BlueZSystem, socket choice: SocketChoice = .never,
        removed: @escaping @Sendable () async -> BluetoothError = {
            BluetoothError(.disconnected, message: "the peripheral disconnected")
        }
    ) async throws {
        let id = nextID.add(1, ordering: .relaxed).newValue
        try await queue.withLock { [self] in
            if let entry = entries.withLock({ $0[characteristic] }) {
                entry.fanout.add(continuation, id: id)
                return
            }
            let fanout = Fanout()
            fanout.add(continuation, id: id)
            // Followed from before the socket or StartNotify, so that the characteristic or its
            // device going away while BlueZ answers is seen too.
            let changes = system.tree.changes()
            var socket: AcquiredSocket?
            if choice != .never {
                socket = try await acquireSocket(
                    for: characteristic, feeding: fanout, system: system, choice: choice, removed: removed)
            }
            var stopReceiving: @Sendable () -> Void = {}
            if socket == nil {
                stopReceiving = try await startNotify(characteristic, feeding: fanout, system: system)
            }
            let watcher = Task { [tree = system.tree] in
                // Gone already (removed while StartNotify was answered, before any value), or when
                // BlueZ says so.
                let isConnected =
                    (try? tree.properties(of: BlueZPeripheralBackend.device, at: device)?.decode(
                        "Connected", as: Bool.self)) != false
                var error = BluetoothError(.disconnected, message: "the peripheral disconnected")
                if isConnected, tree.interfaces(at: characteristic) == nil {
                    error = await removed()
                } else if isConnected {
                    for await change in changes {
                        if case .interfacesRemoved(characteristic, _) = change {
                            // The link dropping removes it too: `removed` tells that from the
                            // peripheral changing its services.
                            error = await removed()
                            break
                        }
                        if case .propertiesChanged(device, BlueZPeripheralBackend.device, let changed, _) = change,
                            (try? changed.decode("Connected", as: Bool.self)) == false
                        {
                            break
                        }
                    }
                }
                guard !Task.isCancelled else { return }
                fanout.finishAll(throwing: error)
            }
            entries.withLock {
                $0[characteristic] = Entry(
                    fanout: fanout, socket: socket, stopReceiving: stopReceiving, watcher: watcher)
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
        if let socket = entry.socket {
            // Closing the socket is how a client releases it; BlueZ then disables notifications.
            await socket.release(drainLimit: .zero)
        } else {
            _ = try? await system.call(characteristic, BlueZPeripheralBackend.characteristic, "StopNotify")
        }
    }

    /// Attaches `fanout` to the characteristic's `PropertiesChanged` and starts notifications in
    /// BlueZ; returns what detaches it.
    private func startNotify(_ characteristic: DBusObjectPath, feeding fanout: Fanout, system: BlueZSystem)
        async throws -> @Sendable () -> Void
    {
        // Attach before StartNotify, so the first value is not lost.
        let stopReceiving = system.tree.receiveValues(
            of: characteristic, deliver: Fanout.Reader(fanout).deliver,
            onConnectionLost: { error in
                fanout.finishAll(
                    throwing: BluetoothError(.daemonUnavailable, message: "the bus connection was lost", cause: error))
            })
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
        return stopReceiving
    }

    /// Acquires the characteristic's notification socket, feeding `fanout`; `nil` when BlueZ
    /// refuses and the choice lets the bus take over.
    ///
    /// BlueZ enables notifications before it answers, and writes each one to the socket as a
    /// message, so no value is lost before the first. A refusal (`NotSupported` for a
    /// characteristic that does not notify, `NotPermitted` when another client holds the socket,
    /// `InProgress` when a client started notifications on the bus) keeps BlueZ's code.
    private func acquireSocket(
        for characteristic: DBusObjectPath, feeding fanout: Fanout, system: BlueZSystem, choice: SocketChoice,
        removed: @escaping @Sendable () async -> BluetoothError
    ) async throws -> AcquiredSocket? {
        do {
            let (descriptor, mtu) = try await BlueZPeripheralBackend.acquire(
                "AcquireNotify", characteristic, system: system)
            return try AcquiredSocket(
                socket: descriptor, attMTU: mtu, onValue: Fanout.Reader(fanout).yield,
                onEnd: { [tree = system.tree] in
                    // BlueZ closes the socket when the link drops, and when the characteristic
                    // leaves the database (before the InterfacesRemoved signal, which `removed`
                    // waits past): tell the two apart, as the bus subscription's watcher does.
                    // Closed by us, the last stream having ended: nothing to tell.
                    guard fanout.hasConsumers else { return }
                    Task {
                        var error = await removed()
                        if error.code == .attributeRemoved, tree.interfaces(at: characteristic) != nil {
                            error = BluetoothError(
                                .disconnected, message: "BlueZ closed the notification socket of \(characteristic)")
                        }
                        fanout.finishAll(throwing: error)
                    }
                })
        } catch let error as BluetoothError
            where choice == .preferred
            && (BlueZPeripheralBackend.refusesForGood(error) || error.code == .notPermitted
                || error.code == .inProgress)
        {
            return nil
        }
    }

    /// Waits until the subscriptions ended so far have been stopped in BlueZ.
    func drain() async {
        await queue.drain()
    }
}
