import AbleCore
import AbleDBus
import AbleIO

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
        /// Centrals whose socket `bluetoothd` closed when another central left, although they
        /// are still connected and subscribed (see ``recoversSocketsClosedByAnotherCentral``).
        var orphans: [AttributeID: Set<Central>] = [:]
        /// When each central's socket of a characteristic last ended.
        var ends: [AttributeID: [Central: ContinuousClock.Instant]] = [:]
        var nextToken: UInt64 = 0
        var isClosed = false
    }

    private let state = Lock(State())
    /// Whether a central is connected to the server's adapter now.
    private let isConnected: @Sendable (Central) -> Bool
    /// How long after a socket ends its central's departure (or another central's) is awaited to
    /// tell `bluetoothd`'s mistake from an unsubscription.
    static let departureWindow: Duration = .seconds(3)

    /// BlueZ 5.69 to at least 5.87 (`src/gatt-database.c`): when a central that is not bonded
    /// disconnects, `clear_ccc_state` calls the characteristic's CCC callback with no request,
    /// and `ccc_write_cb` then frees the first socket of its queue (`match_client_att` matches any
    /// socket when given no ATT link): the socket of the central that subscribed first, although
    /// that central is still connected and `bluetoothd` still holds its subscription. Able keeps
    /// such a central as a subscriber (an orphan, reached through `PropertiesChanged`) until it
    /// disconnects or subscribes again, instead of reporting an unsubscription that did not
    /// happen.
    let recoversSocketsClosedByAnotherCentral = Lock(false)

    init(isConnected: @escaping @Sendable (Central) -> Bool) {
        self.isConnected = isConnected
    }

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
                    // bluetoothd closed its end: the central unsubscribed, or its link went down,
                    // or (5.69 and later) another central's link went down.
                    guard let self, let wasFirstOfSeveral = self.remove(id, token: token) else { return }
                    if let central, wasFirstOfSeveral,
                        self.recoversSocketsClosedByAnotherCentral.withLock({ $0 })
                    {
                        self.resolveEnd(of: central, id, events: events)
                    } else {
                        events.subscriptionChanged(central, id, false)
                    }
                })
        } catch {
            _ = Glibc.close(theirs)
            throw error
        }
        let (replaced, wasOrphan) = state.withLock { state -> (Entry?, Bool) in
            var entries = state.entries[id] ?? []
            let old = entries.firstIndex { $0.central == central }.map { entries.remove(at: $0) }
            entries.append(Entry(token: token, socket: socket, central: central, confirmations: confirmations))
            state.entries[id] = entries
            let wasOrphan = central.map { state.orphans[id]?.remove($0) != nil } ?? false
            return (old, wasOrphan)
        }
        if let replaced {
            // bluetoothd asked again for a central it had a socket for: the old one is stale.
            Task { await replaced.socket.release(drainLimit: .zero) }
        } else if !wasOrphan {
            events.subscriptionChanged(central, id, true)
        }
        return DBusFileDescriptor(owning: theirs)
    }

    /// Forgets a socket; `nil` if it was gone already, else whether it was the oldest of several
    /// (the one `bluetoothd` 5.69 and later closes by mistake when another central leaves; the
    /// other central's socket may have ended just before).
    private func remove(_ id: AttributeID, token: UInt64) -> Bool? {
        state.withLock { state in
            guard let entries = state.entries[id], let index = entries.firstIndex(where: { $0.token == token })
            else { return nil }
            let now = ContinuousClock.now
            state.entries[id]!.remove(at: index)
            guard let central = entries[index].central else { return false }
            let anotherJustEnded = (state.ends[id] ?? [:]).contains { other, at in
                other != central && now - at < Self.departureWindow
            }
            state.ends[id, default: [:]][central] = now
            return index == 0 && (entries.count > 1 || anotherJustEnded)
        }
    }

    /// Decides whether the first subscriber's socket ended because that central left or
    /// unsubscribed (reported as an unsubscription) or because another central left (the central
    /// stays a subscriber, as an orphan): waits up to ``departureWindow`` for one central or the
    /// other to be gone. A socket end is rare (a central leaving), so a short-lived task is fine.
    private func resolveEnd(of central: Central, _ id: AttributeID, events: GATTServerEvents) {
        let ended = ContinuousClock.now
        Task { [weak self] in
            while let self, ContinuousClock.now - ended < Self.departureWindow {
                if !self.isConnected(central) { break }
                // Another central's socket ended about when this one's did, and that central left.
                let others = self.state.withLock { state in
                    (state.ends[id] ?? [:]).filter { other, at in
                        other != central && at - ended < Self.departureWindow && ended - at < Self.departureWindow
                    }.keys
                }
                if others.contains(where: { !self.isConnected($0) }) {
                    let orphaned = self.state.withLock { state -> Bool in
                        guard !state.isClosed, state.entries[id]?.contains(where: { $0.central == central }) != true
                        else { return false }
                        state.orphans[id, default: []].insert(central)
                        return true
                    }
                    // It may have left meanwhile, before the orphan was recorded.
                    if orphaned, !self.isConnected(central), self.centralLeft(central).contains(id) {
                        events.subscriptionChanged(central, id, false)
                    }
                    return
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
            // It left, or unsubscribed (its socket ended, no other central's did), or it
            // subscribed again meanwhile (a new socket: nothing to report).
            guard let self else { return }
            let resubscribed = self.state.withLock { $0.entries[id]?.contains { $0.central == central } == true }
            if !resubscribed { events.subscriptionChanged(central, id, false) }
        }
    }

    /// A central disconnected: it is no orphan any more. Returns the characteristics it was one of.
    func centralLeft(_ central: Central) -> [AttributeID] {
        state.withLock { state in
            var ids: [AttributeID] = []
            for (id, centrals) in state.orphans where centrals.contains(central) {
                state.orphans[id]!.remove(central)
                ids.append(id)
            }
            return ids
        }
    }

    /// The centrals still subscribed to a characteristic whose socket `bluetoothd` closed by
    /// mistake (see ``recoversSocketsClosedByAnotherCentral``).
    func orphans(of id: AttributeID) -> Set<Central> {
        state.withLock { $0.orphans[id] ?? [] }
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
            state.orphans = [:]
            defer { state.entries = [:] }
            return state.entries.values.flatMap { $0 }
        }
        for entry in entries { await entry.socket.release(drainLimit: .milliseconds(500)) }
    }
}
