/// The state of a channel's sending side: the sends waiting for the socket to take them, in order,
/// whether the write source is paused, and the error that ended sending, if one did.
///
/// A send that finds no one queued before it goes straight to the socket; one that finds the
/// socket full (`EAGAIN`) or others waiting joins the queue, which the write source drains in
/// order when the socket becomes writable. So sends are never reordered, and nothing is dropped.
///
/// A send may carry several packets (a batch): they queue one after another under the send's id,
/// and only the last carries the waiter, so the sender is woken once, when the socket has taken
/// them all, rather than once per packet.
///
/// `Waiter` is what a suspended sender waits with (a continuation; a plain value in tests).
struct SendStateMachine<Waiter> {
    struct Pending {
        var id: UInt64
        var packet: [UInt8]
        /// Set on a send's last packet only.
        var waiter: Waiter?
    }

    private var pending = RingBuffer<Pending>()
    private var nextID: UInt64 = 0

    /// The error every send throws from now on, once sending has ended.
    private(set) var failure: BluetoothError?

    /// Whether the write source is paused; it runs only while sends wait.
    private(set) var isWriterPaused = true

    /// How many sends had to wait for the socket.
    private(set) var waitCount = 0

    init() {}

    /// How many packets wait (a batch counts each of its packets).
    var pendingCount: Int { pending.count }

    enum StartAction {
        /// Nothing is queued: try the socket now.
        case sendNow
        /// Others are queued: wait, under this id.
        case wait(id: UInt64)
        /// Sending has ended.
        case fail(BluetoothError)
    }

    /// A send starts.
    mutating func start() -> StartAction {
        if let failure { return .fail(failure) }
        guard pending.isEmpty else { return .wait(id: makeID()) }
        return .sendNow
    }

    /// A new id for a send that has to wait.
    mutating func makeID() -> UInt64 {
        nextID &+= 1
        return nextID
    }

    enum EnqueueAction {
        /// Queued; if `resumeWriter`, resume the write source.
        case queued(resumeWriter: Bool)
        /// Nothing is queued any more: try the socket now, then ``enqueue(id:packet:waiter:)`` on `EAGAIN`.
        case sendNow
        /// Sending has ended.
        case fail(BluetoothError)
    }

    /// A send that has to wait offers its packet; `tryFirst` lets it try the socket itself if the
    /// queue has emptied since it started.
    mutating func enqueue(id: UInt64, packet: [UInt8], waiter: Waiter, tryFirst: Bool) -> EnqueueAction {
        enqueue(id: id, packets: CollectionOfOne(packet), from: 0, waiter: waiter, tryFirst: tryFirst)
    }

    /// A send of several packets that has to wait offers those the socket has not taken yet, from
    /// `offset` on (at least one), in order; `waiter` is resumed once they have all gone.
    mutating func enqueue(
        id: UInt64, packets: some RandomAccessCollection<[UInt8]> & Sendable, from offset: Int, waiter: Waiter,
        tryFirst: Bool
    ) -> EnqueueAction {
        if let failure { return .fail(failure) }
        if tryFirst && pending.isEmpty { return .sendNow }
        let last = packets.count - 1
        for (index, packet) in packets.enumerated() where index >= offset {
            pending.append(Pending(id: id, packet: packet, waiter: index == last ? waiter : nil))
        }
        waitCount += 1
        guard isWriterPaused else { return .queued(resumeWriter: false) }
        isWriterPaused = false
        return .queued(resumeWriter: true)
    }

    /// The packet the write source should send next.
    var nextPacket: [UInt8]? { pending.first?.packet }

    /// The queued packet `offset` places after ``nextPacket`` (`0` is ``nextPacket``), for sending
    /// several at once; `offset` must be less than ``pendingCount``.
    func packet(at offset: Int) -> [UInt8] { pending[offset: offset].packet }

    /// The socket took the packet from ``nextPacket``: its send's waiter if it was that send's last.
    mutating func removeNext() -> Waiter? {
        pending.popFirst()?.waiter
    }

    /// The socket refused the packet from ``nextPacket`` (that packet only): its send ends, with the
    /// packets of it still queued. Returns the send's waiter.
    mutating func removeNextSend() -> Waiter? {
        guard let id = pending.first?.id else { return nil }
        return cancel(id: id)
    }

    /// The write source found the queue empty: whether to pause it.
    mutating func writerIdle() -> Bool {
        guard pending.isEmpty, !isWriterPaused else { return false }
        isWriterPaused = true
        return true
    }

    /// A waiting send was cancelled: its waiter, if the socket had not taken all of it yet. Its
    /// packets still queued are dropped; those the socket took are gone.
    mutating func cancel(id: UInt64) -> Waiter? {
        pending.removeAll { $0.id == id }.last?.waiter
    }

    /// Sending ends with `error` (the first error is kept if sending had already ended).
    ///
    /// - Returns: The waiting senders, to resume with ``failure``.
    mutating func fail(_ error: BluetoothError) -> [Waiter] {
        if failure == nil { failure = error }
        return pending.removeAll().compactMap(\.waiter)
    }
}
