import CLinux
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The engine of an L2CAP channel (the public `L2CAPChannel`) and of a characteristic's acquired
/// socket: one connected, nonblocking `SOCK_SEQPACKET` socket on the
/// sockets' event loop (``EventLoop/sockets``), whose read handler receives SDUs into the packet
/// buffer, and whose write handler sends the SDUs that found the socket full.
///
/// Thread safety: the sending side is a ``SendStateMachine`` behind `sending`; the receiving side
/// is the ``WatermarkBuffer`` `packets`, which lets one party at a time use the
/// ``PacketReceiver``. `lifecycle` is touched only on the loop, where the socket's handlers and
/// the owning actor run. Hence `@unchecked Sendable`.
///
/// The socket's handlers hold the core; cancelling the watch (``tearDown(ending:sendError:)``)
/// releases them, and the owning channel tears down when it goes away.
package final class ChannelCore: @unchecked Sendable {
    package typealias SendWaiter = UnsafeContinuation<Void, any Error>

    /// Takes every received SDU straight from the socket's read handler, on the loop,
    /// instead of the packet buffer: for a socket whose values go on into a buffer of their own
    /// (a characteristic's notification socket feeding its streams' `DeliveryBuffer`s), with no
    /// task and no second buffer in between. The SDUs of one run of the handler are handed over
    /// as one `DeliveryBatch` when there are several, so a consumer waiting on them is woken once
    /// per run, not per SDU. Each SDU's storage is used again for a later one if `packet` and
    /// whatever it handed the SDU to kept no copy of it.
    ///
    /// Nothing stops reading: what `packet` does with a value it has no room for is its own
    /// policy (a notification stream drops the newest and counts it).
    package struct DirectReceiver: Sendable {
        /// Called with each SDU, in order, on the loop.
        package let packet: @Sendable ([UInt8]) -> Void
        /// Called once when the socket ends, from either side, after the last SDU: `nil` for a
        /// normal end (the peer's hang-up or this side's close), else the error.
        package let end: @Sendable (SocketError?) -> Void

        package init(packet: @escaping @Sendable ([UInt8]) -> Void, end: @escaping @Sendable (SocketError?) -> Void) {
            self.packet = packet
            self.end = end
        }
    }

    package let socket: CInt
    package let operations: SocketOperations
    /// The loop the socket's handlers and the owning actor run on.
    package let loop: EventLoop
    package let sendMTU: Int
    package let receiveMTU: Int
    package let packets: WatermarkBuffer<[UInt8]>

    private let receiver: PacketReceiver
    private let directReceiver: DirectReceiver?
    /// The batch the direct receiver's values of one handler run go out in; used on the loop only.
    private let deliveryBatch = DeliveryBatch()
    private let sending = Lock(SendStateMachine<SendWaiter>())
    /// Where a `sendmmsg(2)` gathers its headers; used only on the sending lock.
    private let gatherSpace = GatherSpace(capacity: ChannelCore.packetsPerCall)
    /// Whether ``closeSocket()`` has closed the descriptor: set, and the descriptor closed, under
    /// this lock, so that a caller from another thread (``withOpenSocket(_:)``) never uses the
    /// number once it may be someone else's.
    private let descriptorClosed = Lock(false)
    /// The socket's registration with the loop: reading while the buffer has room, writing
    /// while sends wait for room.
    private let watch: LoopSocket

    // Touched only on the loop.
    private var lifecycle = Lifecycle.open
    /// The most SDUs one run of ``readAvailable()`` received; written on the loop only.
    private let longestReadRunStorage = Atomic<Int>(0)

    private enum Lifecycle {
        case open
        /// Torn down; `watched` until the loop has let go of the socket, then closing once no
        /// consumer is in `recv(2)`.
        case closing(watched: Bool, waiters: [UnsafeContinuation<Void, Never>])
        case closed
    }

    /// Takes over a connected, nonblocking socket and starts receiving.
    ///
    /// - Parameters:
    ///   - socket: The socket; the core closes it.
    ///   - operations: The socket calls to make.
    ///   - loop: The loop to run on.
    ///   - sendMTU: The largest SDU the peer accepts.
    ///   - receiveMTU: The largest SDU the peer may send; the receive buffer's size.
    ///   - watermarks: When to stop and restart reading.
    ///   - directReceiver: Takes the SDUs instead of the packet buffer, which then stays empty
    ///     and only ends.
    package init(
        socket: CInt,
        operations: SocketOperations,
        loop: EventLoop = .sockets,
        sendMTU: Int,
        receiveMTU: Int,
        watermarks: BufferWatermarks,
        directReceiver: DirectReceiver? = nil
    ) {
        self.directReceiver = directReceiver
        self.socket = socket
        self.operations = operations
        self.loop = loop
        self.sendMTU = sendMTU
        self.receiveMTU = receiveMTU
        // A direct receiver takes every SDU at once, so SDUs may be read several at a time.
        let receiver = PacketReceiver(
            socket: socket, operations: operations, receiveMTU: receiveMTU, batching: directReceiver != nil)
        self.receiver = receiver
        let watch = LoopSocket(descriptor: socket, loop: loop)
        self.watch = watch
        // The socket is level-triggered, so one left readable is reported again once reading
        // resumes; but an end the receiver met (and remembers) may leave nothing to report, so
        // resuming also runs the handler once.
        let kickReader = receiver.kickReader
        packets = WatermarkBuffer(
            watermarks: .init(high: watermarks.high, low: watermarks.low),
            pauseProducer: { watch.set(.read, false) },
            resumeProducer: {
                watch.set(.read, true)
                kickReader()
            },
            fetch: { receiver.receiveForConsumer() }
        )
        // Held strongly (a weak reference would slow every retain of the core); `closeSocket`
        // breaks the cycle.
        kickReader.action = { loop.execute { self.readAvailable() } }
        // The handlers hold the core until the watch is cancelled. Writing is watched only while
        // sends wait for room.
        // A direct receiver's `packet` is captured here, so that each readiness event passes it on
        // from the handler's context rather than copying (retaining) it out of the core.
        let readable: () -> Void
        if let packet = directReceiver?.packet {
            readable = { self.readAvailable(directlyInto: packet) }
        } else {
            readable = { self.readAvailable() }
        }
        watch.start(interest: .read, readable: readable, writable: { self.writeAvailable() })
    }

    // MARK: Receiving

    /// How many SDUs, and how many of their bytes, one run of the read handler receives before it
    /// lets the loop's other work run; the socket, still readable, is handled again on the
    /// loop's next turn.
    ///
    /// A consumer that shares the channel's executor (as `L2CAPChannel` suggests) runs on the
    /// loop, as do the other sockets: without a bound, a handler that a fast peer keeps supplying
    /// would fill the packet buffer to its high watermark (1024 SDUs, 64 MiB at the largest)
    /// before anyone else gets a turn.
    package static let readBatch = (packets: 64, bytes: 256 * 1024)

    /// Receives the SDUs the socket holds, until it would block, the buffer is full, a consumer
    /// receives for itself, or a batch (``readBatch``) is done; on the loop.
    private func readAvailable() {
        if let packet = directReceiver?.packet {
            readAvailable(directlyInto: packet)
            return
        }
        guard case .open = lifecycle else { return }
        var batch = (packets: 0, bytes: 0)
        defer {
            if batch.packets > longestReadRunStorage.load(ordering: .relaxed) {
                longestReadRunStorage.store(batch.packets, ordering: .relaxed)
            }
        }
        while true {
            // The rest waits for the loop's next turn.
            guard batch.packets < Self.readBatch.packets, batch.bytes < Self.readBatch.bytes else { return }
            var outcome = PacketReceiver.Outcome.wouldBlock
            let produced = packets.produce { () -> [UInt8]? in
                outcome = receiver.receive()
                guard case .packet(let packet) = outcome else { return nil }
                return packet
            }
            switch (produced, outcome) {
            case (.produced, .packet(let packet)):
                batch.packets += 1
                batch.bytes += packet.count
            case (.produced, _): continue
            case (.paused, _): return
            case (.nothing, .end(let error)):
                tearDown(ending: error, sendError: error ?? Self.peerClosed)
                return
            case (.nothing, _):
                return
            }
        }
    }

    /// ``readAvailable()`` for a ``DirectReceiver`` whose `packet` closure is `packetReceiver`.
    private func readAvailable(directlyInto packetReceiver: @Sendable ([UInt8]) -> Void) {
        guard case .open = lifecycle else { return }
        readDirectly(into: packetReceiver)
    }

    /// ``readAvailable()`` for a ``DirectReceiver``: hands every SDU that is ready to its `packet`
    /// closure (passed alone: copying the receiver would retain both of its closures), up to a
    /// batch (``readBatch``); the rest waits for the loop's next turn.
    ///
    /// The SDUs go out as one ``DeliveryBatch`` when there are several; one that came alone (as a
    /// link paces notifications) wakes its consumer once anyway, and goes out without the batch's
    /// bookkeeping.
    private func readDirectly(into packetReceiver: @Sendable ([UInt8]) -> Void) {
        var batch = (packets: 0, bytes: 0)
        var batchStarted = false
        defer {
            if batchStarted { deliveryBatch.end() }
            if batch.packets > longestReadRunStorage.load(ordering: .relaxed) {
                longestReadRunStorage.store(batch.packets, ordering: .relaxed)
            }
        }
        while batch.packets < Self.readBatch.packets, batch.bytes < Self.readBatch.bytes {
            switch receiver.receive() {
            case .packet(let packet):
                // Decided at the first SDU: a batch only if it did not come alone.
                if batch.packets == 0 { batchStarted = !receiver.tookAll && deliveryBatch.begin() }
                batch.packets += 1
                batch.bytes += packet.count
                packetReceiver(packet)
                // A value its takers did not keep lends its storage to the next one.
                receiver.recycle(packet)
            case .wouldBlock:
                return
            case .end(let error):
                tearDown(ending: error, sendError: error ?? Self.peerClosed)
                return
            }
        }
    }

    // MARK: Sending

    private enum SendAttempt {
        case sent
        case wouldBlock
        /// The socket refused this packet only (`EMSGSIZE`); the channel goes on.
        case rejected(SocketError)
        /// Sending cannot go on.
        case fatal(SocketError)
    }

    /// One `send(2)` of a whole SDU, retried on `EINTR`.
    private func attemptSend(_ packet: [UInt8]) -> SendAttempt {
        let result = packet.withUnsafeBytes { bytes in
            SocketOperations.retryingInterrupts {
                operations.send(socket, bytes, CInt(MSG_NOSIGNAL) | CInt(MSG_DONTWAIT))
            }
        }
        switch result {
        case .success(let count) where count == packet.count: return .sent
        case .success(let count): return Self.shortSend(took: count, of: packet.count)
        case .failure(let errno): return Self.failedSend(errno, length: packet.count)
        }
    }

    /// A send the socket took only part of. SOCK_SEQPACKET sends are all or nothing; a short
    /// count means the peer got a truncated SDU and the stream of SDUs can no longer be trusted.
    private static func shortSend(took count: Int, of length: Int) -> SendAttempt {
        .fatal(
            SocketError(
                .internalFailure,
                message: "the socket took \(count) of the \(length) bytes of an SDU; the channel cannot go on"))
    }

    /// What a send of an SDU of `length` bytes that failed with `errno` means.
    private static func failedSend(_ errno: Errno, length: Int) -> SendAttempt {
        if errno.isWouldBlock { return .wouldBlock }
        if errno == .messageTooLong {
            return .rejected(SocketError(errno, while: "sending an SDU of \(length) bytes"))
        }
        return .fatal(SocketError(errno, while: "sending on the L2CAP channel"))
    }

    /// At most how many packets one `sendmmsg(2)` carries.
    package static let packetsPerCall = 32

    /// Sends `count` packets, each taken from `next()` in order, with as few calls as the socket
    /// allows: `send(2)` for a single packet, `sendmmsg(2)` for several (up to ``packetsPerCall``
    /// a call), so that a writer paced by the link pays one call per wake rather than a send that
    /// succeeds and one that says `EAGAIN`. Returns how many the socket took and why it stopped:
    /// ``SendAttempt/sent`` if it took them all. On the sending lock (it gathers into
    /// `gatherSpace`).
    ///
    /// When `sendmmsg` takes some of its packets, it does not say why it stopped; this reports
    /// ``SendAttempt/wouldBlock``, and the next attempt, with the refused packet first, finds out
    /// (the socket's write readiness is level-triggered, so that attempt comes).
    private func attemptSend(count: Int, next: () -> [UInt8]) -> (sent: Int, stop: SendAttempt) {
        var sent = 0
        while sent < count {
            let batch = min(count - sent, Self.packetsPerCall)
            guard batch > 1, let sendMessages = operations.sendMessages else {
                let attempt = attemptSend(next())
                guard case .sent = attempt else { return (sent, attempt) }
                sent += 1
                continue
            }
            let (taken, stop) = sendGathered(batch, next: next, with: sendMessages)
            sent += taken
            if let stop { return (sent, stop) }
        }
        return (sent, .sent)
    }

    /// One `sendmmsg(2)` of the next `count` packets: how many the socket took, and why it stopped
    /// if not all.
    private func sendGathered(
        _ count: Int, next: () -> [UInt8], with sendMessages: SocketOperations.MessagesCall
    ) -> (taken: Int, stop: SendAttempt?) {
        let messages = gatherSpace.messages
        let vectors = gatherSpace.vectors
        // Each packet's bytes stay valid while its closure runs, so the call is made innermost.
        func gather(_ index: Int) -> SyscallResult<Int> {
            guard index < count else {
                return SocketOperations.retryingInterrupts {
                    sendMessages(
                        socket, UnsafeMutableBufferPointer(start: messages, count: count),
                        CInt(MSG_NOSIGNAL) | CInt(MSG_DONTWAIT))
                }
            }
            return next().withUnsafeBytes { bytes in
                vectors[index] = iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
                var header = msghdr()
                header.msg_iov = vectors + index
                header.msg_iovlen = 1
                messages[index] = able_mmsghdr(msg_hdr: header, msg_len: 0)
                return gather(index + 1)
            }
        }
        switch gather(0) {
        case .success(let taken):
            for index in 0..<taken where Int(messages[index].msg_len) != vectors[index].iov_len {
                return (index, Self.shortSend(took: Int(messages[index].msg_len), of: vectors[index].iov_len))
            }
            return (taken, taken < count ? .wouldBlock : nil)
        case .failure(let errno):
            return (0, Self.failedSend(errno, length: vectors[0].iov_len))
        }
    }

    /// Sends one SDU, waiting while the socket is full.
    package func send(_ packet: [UInt8], isolation actor: isolated (any Actor)? = #isolation) async throws {
        try check(packet)
        try await send(checked: .one(packet), isolation: actor)
    }

    /// Sends `packets` in order, each as one SDU, waiting while the socket is full; the caller is
    /// resumed once, when the socket has taken the last of them, not once per packet.
    ///
    /// If it throws, the packets before the one that failed (or the first still queued when the
    /// task was cancelled) went into the socket, and none after it.
    package func send(contentsOf packets: [[UInt8]], isolation actor: isolated (any Actor)? = #isolation) async throws {
        try await send(contentsOf: packets[...], isolation: actor)
    }

    /// Sends the packets of a slice in order, as the array's form does; a waiting send keeps the
    /// slice, not a copy of its packets.
    package func send(
        contentsOf packets: ArraySlice<[UInt8]>, isolation actor: isolated (any Actor)? = #isolation
    ) async throws {
        for packet in packets { try check(packet) }
        guard !packets.isEmpty else { return }
        try await send(checked: .many(packets), isolation: actor)
    }

    /// Throws if `packet` can never be sent on this channel.
    private func check(_ packet: [UInt8]) throws {
        guard !packet.isEmpty else {
            throw SocketError(
                .invalidArgument,
                message: "an L2CAP SDU cannot be empty: a SOCK_SEQPACKET peer could not tell it from the end")
        }
        guard packet.count <= sendMTU else {
            throw SocketError(
                .tooLong, message: "an SDU of \(packet.count) bytes is over the send MTU of \(sendMTU)")
        }
    }

    private enum SendStart {
        case done
        case failed(SocketError)
        /// Wait under this id, with the packets from `offset` on; `socketFull` if the socket just
        /// said `EAGAIN` (rather than others being queued), so there is no point in trying it
        /// again before queueing.
        case wait(UInt64, from: Int, socketFull: Bool)
    }

    private enum EnqueueOutcome {
        case queued
        case sent
        case failed(any Error)
    }

    private enum SendProgress {
        /// The socket took them all.
        case sent
        /// The socket is full with these left, the first at this index.
        case wouldBlock(from: Int)
        case failed(SocketError)
    }

    /// Puts `packets[start...]` into the socket while it takes them; on the sending lock.
    private func sendWhileRoom(
        _ packets: SendPackets, from start: Int, _ machine: inout SendStateMachine<SendWaiter>
    ) -> SendProgress {
        var index = start
        let (sent, stop) = attemptSend(count: packets.count - start) {
            defer { index += 1 }
            return packets[index]
        }
        switch stop {
        case .sent: return .sent
        case .wouldBlock: return .wouldBlock(from: start + sent)
        case .rejected(let error): return .failed(error)
        case .fatal(let error):
            _ = machine.fail(error)
            return .failed(error)
        }
    }

    private func send(checked packets: SendPackets, isolation actor: isolated (any Actor)?) async throws {
        let start = sending.withLock { machine -> SendStart in
            switch machine.start() {
            case .fail(let error): return .failed(error)
            case .wait(let id): return .wait(id, from: 0, socketFull: false)
            case .sendNow:
                switch sendWhileRoom(packets, from: 0, &machine) {
                case .sent: return .done
                case .wouldBlock(let offset): return .wait(machine.makeID(), from: offset, socketFull: true)
                case .failed(let error): return .failed(error)
                }
            }
        }
        let id: UInt64
        let offset: Int
        let socketFull: Bool
        switch start {
        case .done: return
        case .failed(let error): throw error
        case .wait(let waitID, let from, let full): (id, offset, socketFull) = (waitID, from, full)
        }
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation(isolation: actor) { (continuation: SendWaiter) in
                enqueue(id: id, packets: packets, from: offset, continuation: continuation, tryFirst: !socketFull)
            }
        } onCancel: {
            // A send's packets still queued have not reached the socket at all: drop them whole.
            sending.withLock { $0.cancel(id: id) }?.resume(throwing: CancellationError())
        }
    }

    /// Queues a send's packets from `offset` on; with `tryFirst`, first tries the socket if the
    /// queue has emptied meanwhile.
    private func enqueue(
        id: UInt64, packets: SendPackets, from offset: Int, continuation: SendWaiter, tryFirst: Bool
    ) {
        let outcome = sending.withLock { machine -> EnqueueOutcome in
            // A cancellation that came before the send was queued found nothing to cancel.
            guard !Task.isCancelled else { return .failed(CancellationError()) }
            var tryFirst = tryFirst
            var offset = offset
            while true {
                let action = machine.enqueue(
                    id: id, packets: packets, from: offset, waiter: continuation, tryFirst: tryFirst)
                switch action {
                case .fail(let error):
                    return .failed(error)
                case .queued(let resumeWriter):
                    if resumeWriter { watch.set(.write, true) }
                    return .queued
                case .sendNow:
                    switch sendWhileRoom(packets, from: offset, &machine) {
                    case .sent: return .sent
                    case .wouldBlock(let left):
                        offset = left
                        tryFirst = false
                    case .failed(let error): return .failed(error)
                    }
                }
            }
        }
        switch outcome {
        case .queued: break
        case .sent: continuation.resume()
        case .failed(let error): continuation.resume(throwing: error)
        }
    }

    /// Sends the waiting SDUs, in order, while the socket takes them.
    private func writeAvailable() {
        var resumptions: [(SendWaiter, SocketError?)] = []
        sending.withLock { machine in
            defer {
                if machine.writerIdle() { watch.set(.write, false) }
            }
            while machine.pendingCount > 0 {
                let count = machine.pendingCount
                let (sent, stop) = machine.readingAhead { next in attemptSend(count: count, next: next) }
                machine.removeSent(sent) { resumptions.append(($0, nil)) }
                switch stop {
                case .sent:
                    continue
                case .wouldBlock:
                    return
                case .rejected(let error):
                    if let waiter = machine.removeNextSend() { resumptions.append((waiter, error)) }
                case .fatal(let error):
                    resumptions += machine.fail(error).map { ($0, error) }
                }
            }
        }
        for (waiter, error) in resumptions {
            if let error {
                waiter.resume(throwing: error)
            } else {
                waiter.resume()
            }
        }
    }

    // MARK: Closing

    private static let peerClosed = SocketError(.peerClosed, message: "the peer closed the L2CAP channel")
    private static let closed = SocketError(.closed, message: "the L2CAP channel is closed")

    /// Ends both directions and closes the socket once the loop has let go of it.
    ///
    /// - Parameters:
    ///   - error: What the packet stream ends with after its buffered packets; `nil` for a normal end.
    ///   - sendError: What waiting and later sends throw.
    private func tearDown(ending error: SocketError?, sendError: SocketError) {
        loop.checkIsolated()
        guard case .open = lifecycle else { return }
        lifecycle = .closing(watched: true, waiters: [])
        // Sends fail first: a consumer that sees the packet stream end may send at once, on its
        // own thread, and must find the channel ended.
        let waiters = sending.withLock { $0.fail(sendError) }
        packets.finish(throwing: error)
        directReceiver?.end(error)
        watch.cancel { self.socketReleased() }
        for waiter in waiters { waiter.resume(throwing: sendError) }
    }

    /// The loop no longer watches the socket; on the loop.
    private func socketReleased() {
        guard case .closing(_, let waiters) = lifecycle else { return }
        lifecycle = .closing(watched: false, waiters: waiters)
        // A consumer may be in recv(2) on its own thread: close after it.
        packets.whenNotFetching { self.loop.execute { self.closeSocket() } }
    }

    private func closeSocket() {
        guard case .closing(watched: false, let waiters) = lifecycle else { return }
        // Linux closes the descriptor even when close(2) reports EINTR: never retry.
        descriptorClosed.withLock { closed in
            closed = true
            _ = operations.close(socket)
        }
        // No one receives any more (the buffer is finished and no fetch is under way).
        receiver.kickReader.action = nil
        lifecycle = .closed
        for waiter in waiters { waiter.resume() }
    }

    /// Closes the channel from this side and waits until the socket is closed.
    ///
    /// - Parameter actor: The owning channel, whose executor is the loop.
    package func close(isolation actor: isolated (any Actor)? = #isolation) async {
        loop.checkIsolated()
        tearDown(ending: nil, sendError: Self.closed)
        await withUnsafeContinuation(isolation: actor) { continuation in
            switch lifecycle {
            case .closing(let watched, var waiters):
                waiters.append(continuation)
                lifecycle = .closing(watched: watched, waiters: waiters)
            case .open, .closed:
                continuation.resume()
            }
        }
    }

    /// Starts closing, from anywhere, without waiting.
    package func closeSoon() {
        loop.execute { self.tearDown(ending: nil, sendError: Self.closed) }
    }

    // MARK: Observation

    /// Runs `body` with the descriptor, from any thread, unless the channel has closed it: its
    /// number may then belong to a descriptor opened since, elsewhere in the process. The channel
    /// does not close the descriptor while `body` runs; `body` must not block.
    package func withOpenSocket<Result>(_ body: (CInt) -> Result) -> Result? {
        descriptorClosed.withLock { closed in closed ? nil : body(socket) }
    }

    /// How many bytes sent into the socket its peer has not read yet (`ioctl(SIOCOUTQ)`; for
    /// `AF_UNIX`, the bytes of the messages the peer has not taken); 0 once the core has closed
    /// its socket, whose number may by then be another descriptor's.
    package var unreadByteCount: Int {
        withOpenSocket { socket in
            var count: CInt = 0
            guard ioctl(socket, UInt(0x5411), &count) == 0 else { return 0 }
            return Int(count)
        } ?? 0
    }

    /// How many sends have had to wait for the socket.
    package var sendWaitCount: Int { sending.withLock { $0.waitCount } }

    /// How many sends wait now.
    package var pendingSendCount: Int { sending.withLock { $0.pendingCount } }

    /// The most SDUs one run of the read handler has received.
    package var longestReadRun: Int { longestReadRunStorage.load(ordering: .relaxed) }
}

/// The message headers and vectors of one `sendmmsg(2)`, allocated once per channel rather than
/// per call (32 headers are over the 1,024 bytes that a temporary allocation always keeps on
/// the stack).
private final class GatherSpace: @unchecked Sendable {
    package let messages: UnsafeMutablePointer<able_mmsghdr>
    package let vectors: UnsafeMutablePointer<iovec>

    package init(capacity: Int) {
        messages = .allocate(capacity: capacity)
        vectors = .allocate(capacity: capacity)
    }

    deinit {
        messages.deallocate()
        vectors.deallocate()
    }
}
