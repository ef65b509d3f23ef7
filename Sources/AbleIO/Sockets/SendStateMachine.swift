/// The packets of one send: a single SDU, or several in order (an array's slice, not copied).
package enum SendPackets: Sendable {
    case one([UInt8])
    case many(ArraySlice<[UInt8]>)

    package var count: Int {
        switch self {
        case .one: 1
        case .many(let packets): packets.count
        }
    }

    /// The packet at `index`, counted from this send's first (`0`).
    package subscript(index: Int) -> [UInt8] {
        switch self {
        case .one(let packet): packet
        case .many(let packets): packets[packets.startIndex + index]
        }
    }
}

/// The state of a channel's sending side: the sends waiting for the socket to take them, in order,
/// whether the write source is paused, and the error that ended sending, if one did.
///
/// A send that finds no one queued before it goes straight to the socket; one that finds the
/// socket full (`EAGAIN`) or others waiting joins the queue, which the write source drains in
/// order when the socket becomes writable. So sends are never reordered, and nothing is dropped.
///
/// A send may carry several packets (a batch): it queues as one entry that holds them (an array's
/// slice, not a copy per packet) and how many the socket has taken, and its sender is woken once,
/// when the socket has taken them all, rather than once per packet.
///
/// `Waiter` is what a suspended sender waits with (a continuation; a plain value in tests).
package struct SendStateMachine<Waiter> {
    package struct Pending {
        package var id: UInt64
        package var packets: SendPackets
        /// How many of `packets` the socket has taken.
        package var taken: Int
        package var waiter: Waiter

        package var left: Int { packets.count - taken }
    }

    private var pending = RingBuffer<Pending>()
    private var nextID: UInt64 = 0

    /// The error every send throws from now on, once sending has ended.
    private(set) var failure: SocketError?

    /// Whether the write source is paused; it runs only while sends wait.
    private(set) var isWriterPaused = true

    /// How many sends had to wait for the socket.
    private(set) var waitCount = 0

    /// How many packets wait (a batch counts each of its packets).
    private(set) var pendingCount = 0

    package init() {}

    package enum StartAction {
        /// Nothing is queued: try the socket now.
        case sendNow
        /// Others are queued: wait, under this id.
        case wait(id: UInt64)
        /// Sending has ended.
        case fail(SocketError)
    }

    /// A send starts.
    package mutating func start() -> StartAction {
        if let failure { return .fail(failure) }
        guard pending.isEmpty else { return .wait(id: makeID()) }
        return .sendNow
    }

    /// A new id for a send that has to wait.
    package mutating func makeID() -> UInt64 {
        nextID &+= 1
        return nextID
    }

    package enum EnqueueAction {
        /// Queued; if `resumeWriter`, resume the write source.
        case queued(resumeWriter: Bool)
        /// Nothing is queued any more: try the socket now, then enqueue again on `EAGAIN`.
        case sendNow
        /// Sending has ended.
        case fail(SocketError)
    }

    /// A send of one packet that has to wait offers it; `tryFirst` lets it try the socket itself
    /// if the queue has emptied since it started.
    package mutating func enqueue(id: UInt64, packet: [UInt8], waiter: Waiter, tryFirst: Bool) -> EnqueueAction {
        enqueue(id: id, packets: .one(packet), from: 0, waiter: waiter, tryFirst: tryFirst)
    }

    /// A send that has to wait offers the packets the socket has not taken yet, from `offset` on
    /// (at least one), in order; `waiter` is resumed once they have all gone.
    package mutating func enqueue(
        id: UInt64, packets: SendPackets, from offset: Int, waiter: Waiter, tryFirst: Bool
    ) -> EnqueueAction {
        if let failure { return .fail(failure) }
        if tryFirst && pending.isEmpty { return .sendNow }
        precondition(offset < packets.count, "a send queued with nothing left to send")
        pending.append(Pending(id: id, packets: packets, taken: offset, waiter: waiter))
        pendingCount += packets.count - offset
        waitCount += 1
        guard isWriterPaused else { return .queued(resumeWriter: false) }
        isWriterPaused = false
        return .queued(resumeWriter: true)
    }

    /// The packet the write source should send next.
    package var nextPacket: [UInt8]? {
        pending.first.map { $0.packets[$0.taken] }
    }

    /// Calls `body` with a function that returns the queued packets one after another, from
    /// ``nextPacket`` on, for one or more `sendmmsg(2)` calls; `body` may take at most
    /// ``pendingCount`` of them. Reading takes nothing off the queue: ``removeSent(_:finished:)``
    /// does, once the socket has said how many it took.
    package func readingAhead<Result>(_ body: (_ next: () -> [UInt8]) -> Result) -> Result {
        guard var entry = pending.first else { return body { preconditionFailure("no packet is queued") } }
        var entryOffset = 0
        var index = entry.taken
        return body {
            while index == entry.packets.count {
                entryOffset += 1
                entry = pending[offset: entryOffset]
                index = entry.taken
            }
            defer { index += 1 }
            return entry.packets[index]
        }
    }

    /// The socket took the next `count` packets: calls `finished` with the waiter of each send it
    /// finished, in order.
    package mutating func removeSent(_ count: Int, finished: (Waiter) -> Void) {
        precondition(count <= pendingCount, "the socket took \(count) of \(pendingCount) queued packets")
        pendingCount -= count
        var count = count
        while count > 0 {
            let left = pending.first!.left
            guard count >= left else {
                pending.updateFirst { $0.taken += count }
                return
            }
            count -= left
            finished(pending.popFirst()!.waiter)
        }
    }

    /// The socket refused the packet from ``nextPacket`` (that packet only): its send ends, with the
    /// packets of it still queued. Returns the send's waiter.
    package mutating func removeNextSend() -> Waiter? {
        guard let first = pending.popFirst() else { return nil }
        pendingCount -= first.left
        return first.waiter
    }

    /// The write source found the queue empty: whether to pause it.
    package mutating func writerIdle() -> Bool {
        guard pending.isEmpty, !isWriterPaused else { return false }
        isWriterPaused = true
        return true
    }

    /// A waiting send was cancelled: its waiter, if the socket had not taken all of it yet. Its
    /// packets still queued are dropped; those the socket took are gone.
    package mutating func cancel(id: UInt64) -> Waiter? {
        guard let cancelled = pending.removeFirst(where: { $0.id == id }) else { return nil }
        pendingCount -= cancelled.left
        return cancelled.waiter
    }

    /// Sending ends with `error` (the first error is kept if sending had already ended).
    ///
    /// - Returns: The waiting senders, to resume with ``failure``.
    package mutating func fail(_ error: SocketError) -> [Waiter] {
        if failure == nil { failure = error }
        pendingCount = 0
        return pending.removeAll().map(\.waiter)
    }
}
