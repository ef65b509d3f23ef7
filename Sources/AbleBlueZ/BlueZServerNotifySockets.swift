import Able
import AbleDBus
import AbleStreams

#if canImport(Glibc)
    import Glibc
#endif

/// The sockets `bluetoothd` acquired from a GATT server's characteristics with
/// `GattCharacteristic1.AcquireNotify`: the server writes a value into one, `bluetoothd` reads
/// it and notifies.
///
/// `bluetoothd` reads such a socket as fast as it is written and queues the notifications for
/// the link without limit (`src/gatt-database.c`), so the socket alone holds nothing back: the
/// server's ``NotificationPacer`` does. A full socket still makes ``AcquiredSocket/send(_:isolation:)``
/// wait for room (a dispatch source), never drop.
final class BlueZServerNotifySockets: Sendable {
    struct Entry: Sendable {
        let token: UInt64
        let socket: AcquiredSocket
        /// The central the socket serves; `nil` when it serves every subscriber (before 5.69).
        let central: Central?
        /// The indications written into the socket that the central has not confirmed yet, oldest
        /// first: from 5.80 `bluetoothd` writes one byte back for each confirmation
        /// ("gatt: Implement confirmation support for AcquireNotify").
        let confirmations: PendingConfirmations
    }

    /// Indications waiting for their confirmation through one socket, in the order they were sent.
    final class PendingConfirmations: Sendable {
        private let waiters = Lock<[ConfirmationWaiter]>([])

        func append(_ waiter: ConfirmationWaiter) { waiters.withLock { $0.append(waiter) } }

        /// One confirmation came: the oldest indication is confirmed.
        func confirmOldest() {
            waiters.withLock { $0.isEmpty ? nil : $0.removeFirst() }?.confirm()
        }

        func remove(_ waiter: ConfirmationWaiter) { waiters.withLock { $0.removeAll { $0 === waiter } } }

        /// The socket ended: no confirmation will come.
        func endAll() {
            for waiter in waiters.withLock({ waiters in
                defer { waiters = [] }
                return waiters
            }) {
                waiter.end()
            }
        }
    }

    private struct State {
        var entries: [AttributeID: [Entry]] = [:]
        var nextToken: UInt64 = 0
        var isClosed = false
    }

    private let state = Lock(State())

    /// Makes a socketpair for `bluetoothd`'s `AcquireNotify` and keeps this end.
    ///
    /// - Returns: `bluetoothd`'s end, which the reply carries (libdbus duplicates it; the
    ///   descriptor object closes this copy).
    func acquire(
        _ id: AttributeID, central: Central?, mtu: Int, events: GATTServerEvents
    ) throws -> DBusFileDescriptor {
        guard !state.withLock({ $0.isClosed }) else {
            throw DBusError(DBusError.Name(rawValue: "org.bluez.Error.Failed"), "the server is closing")
        }
        let (mine, theirs) = try L2CAPChannel.makeSocketPair(mtu: 2048)
        let token = state.withLock { state in
            state.nextToken += 1
            return state.nextToken
        }
        let socket: AcquiredSocket
        let confirmations = PendingConfirmations()
        do {
            socket = try AcquiredSocket(
                socket: mine, attMTU: mtu,
                onValue: { _ in confirmations.confirmOldest() },
                onEnd: { [weak self] in
                    confirmations.endAll()
                    // bluetoothd closed its end: the central unsubscribed, or its link went down.
                    guard let self, self.remove(id, token: token) else { return }
                    events.subscriptionChanged(central, id, false)
                })
        } catch {
            _ = Glibc.close(theirs)
            throw error
        }
        let replaced = state.withLock { state -> Entry? in
            var entries = state.entries[id] ?? []
            let old = entries.firstIndex { $0.central == central }.map { entries.remove(at: $0) }
            entries.append(Entry(token: token, socket: socket, central: central, confirmations: confirmations))
            state.entries[id] = entries
            return old
        }
        if let replaced {
            // bluetoothd asked again for a central it had a socket for: the old one is stale.
            Task { await replaced.socket.release(drainLimit: .zero) }
        } else {
            events.subscriptionChanged(central, id, true)
        }
        return DBusFileDescriptor(owning: theirs)
    }

    /// Forgets a socket; whether it was still there.
    private func remove(_ id: AttributeID, token: UInt64) -> Bool {
        state.withLock { state in
            guard let index = state.entries[id]?.firstIndex(where: { $0.token == token }) else { return false }
            state.entries[id]!.remove(at: index)
            return true
        }
    }

    /// The open sockets of a characteristic, oldest first.
    func entries(of id: AttributeID) -> [Entry] {
        state.withLock { $0.entries[id] ?? [] }.filter(\.socket.isOpen)
    }

    /// Whether a characteristic has any socket open.
    func hasSockets(_ id: AttributeID) -> Bool { !entries(of: id).isEmpty }

    /// Closes every socket, without reporting unsubscriptions: the server is closing.
    func closeAll() async {
        let entries = state.withLock { state in
            state.isClosed = true
            defer { state.entries = [:] }
            return state.entries.values.flatMap { $0 }
        }
        for entry in entries { await entry.socket.release(drainLimit: .milliseconds(500)) }
    }
}
