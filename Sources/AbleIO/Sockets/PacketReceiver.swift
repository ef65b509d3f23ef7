import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// The receiving side of a channel's socket: `recv(2)` of one SDU at a time into a buffer of the
/// receive MTU, then copied into an array of its size; or, while SDUs come large (half the MTU
/// or more), straight into an array of the MTU's capacity, which becomes the element.
///
/// A receiver that hands every SDU on at once (`batching`: a characteristic's notification
/// socket, whose values go straight to their streams) with a receive MTU of at most
/// ``directReceiveThreshold`` instead takes the SDUs that are there with `recvmmsg(2)`, up to
/// ``batchCapacity(receiveMTU:)``, each into a slot of the MTU in one buffer, then copied. When a
/// `recvmmsg` brings fewer SDUs than it had room for, the socket had no more: once those are
/// handed out, the next call answers "would block" without asking the socket (a link that
/// notifies at its pace would otherwise cost a second call per SDU that finds nothing). The
/// socket is level-triggered on the loop, so an SDU that arrived meanwhile is reported again.
/// An L2CAP channel's receiver does not batch: what its buffer has no room for stays in the
/// socket, where it holds back the peer (L2CAP's credits) and where a reset finds it unread.
///
/// Values that come one per wake-up, as a link paces notifications, make every `recvmmsg` bring a
/// single SDU, and then its extra work in the kernel (the headers copied in and out, a second
/// receive attempt that finds the queue empty) is much of the receive. So after
/// ``loneBatchesBeforeSingles`` such calls in a row, the receiver takes the next
/// ``singleReceivesPerProbe`` SDUs with plain `recv(2)`, one per call, each time answering
/// "would block" next without asking the socket (level-triggered, it is reported again if it
/// holds more); then it asks with `recvmmsg` again, so a burst that starts meanwhile is back in
/// batches within that many SDUs. In `Scripts/bench sockets` (`central-notify-socket-paced`),
/// alternating runs of one build with and without this put the CPU per value about a sixth lower.
///
/// A direct receiver hands each SDU back once its takers are done with it (``recycle(_:)``):
/// when nobody kept it (a stream's handler only looked at it), the next SDU that fits is copied
/// into the same storage, so a paced value costs no allocation and no free.
///
/// The kernel reports a reset once (`sock_error` clears it) and then still hands out the SDUs
/// queued before it, then the end; the receiver holds the error back until those are out. Once
/// it has seen the end, it reports the same end on every later call.
///
/// Thread safety: used by one party at a time, the socket's read handler or a consumer that
/// receives for itself, as the channel's ``WatermarkBuffer`` arranges (its lock orders the
/// turns); hence `@unchecked Sendable`.
package final class PacketReceiver: @unchecked Sendable {
    package enum Outcome {
        case packet([UInt8])
        case wouldBlock
        /// The end: normal (`nil`), or an error. Boxed, so that an outcome is two words and every
        /// SDU's outcome is returned in registers, not copied through memory at the size of an
        /// error.
        indirect case end(SocketError?)
    }

    package let socket: CInt
    package let operations: SocketOperations
    package let receiveMTU: Int

    private let scratch: UnsafeMutableRawBufferPointer
    /// The `recvmmsg` headers, one per slot of `scratch`; empty when SDUs are received one by one.
    private let headers: UnsafeMutableBufferPointer<able_mmsghdr>
    private let vectors: UnsafeMutableBufferPointer<iovec>
    /// The SDUs the last `recvmmsg` brought, and the next of them to hand out.
    private var batch = (count: 0, next: 0)
    /// Whether the last `recvmmsg` found the socket empty before its slots were full, or the last
    /// single `recv` took an SDU: either way the next call answers "would block" without asking.
    private var socketDrained = false
    /// How many `recvmmsg` calls in a row brought a single SDU.
    private var loneBatches = 0
    /// How many more SDUs to take one per `recv` before asking with `recvmmsg` again.
    private var singleReceivesLeft = 0
    /// A reset's error, held back until the SDUs queued before it are out.
    private var deferredError: SocketError? {
        didSet { hasDeferredError = deferredError != nil }
    }
    /// The end met (`nil` for a normal one); meaningful once `hasEnded`.
    private var end: SocketError?
    // Tested on every call instead of the optionals themselves, which each test copies whole.
    private var hasDeferredError = false
    private var hasEnded = false

    /// Where the SDUs are copied to: the storage of one handed back (``recycle(_:)``) if it has
    /// room. No access to it overlaps another (each is one call, on the receiving party's
    /// thread), so it goes without the runtime's check of every access.
    @exclusivity(unchecked) private var storage = ByteStorage()

    /// Whether the last SDU filled at least half the receive MTU: then the next one is received
    /// straight into its own array, sparing a copy of a large SDU.
    private var expectsLargeSDU = false

    /// Receive MTUs up to this size always go through the scratch buffer: copying is cheap there.
    private static let directReceiveThreshold = 4096

    /// Runs the socket's read handler on the loop: for an end this receiver met that the socket
    /// may not report (an SDU over the MTU, an error the kernel reported once), so that the
    /// handler meets it too and tears the channel down.
    package let kickReader = LateCall()

    /// How many `recvmmsg` calls in a row that bring one SDU each turn the receiver to single
    /// `recv` calls.
    package static let loneBatchesBeforeSingles = 4
    /// How many SDUs the receiver then takes one per `recv` before it asks with `recvmmsg` again.
    package static let singleReceivesPerProbe = 64

    /// How many SDUs one `recvmmsg` receives at most: as many slots of the MTU as fit in 8 KB, up
    /// to 8; `1` (SDUs received one by one) over ``directReceiveThreshold``.
    package static func batchCapacity(receiveMTU: Int) -> Int {
        receiveMTU > directReceiveThreshold ? 1 : min(8, max(1, 8192 / max(receiveMTU, 1)))
    }

    package init(socket: CInt, operations: SocketOperations, receiveMTU: Int, batching: Bool = false) {
        self.socket = socket
        self.operations = operations
        self.receiveMTU = receiveMTU
        let slot = max(receiveMTU, 1)
        let slots = batching && operations.receiveMessages != nil ? Self.batchCapacity(receiveMTU: receiveMTU) : 1
        scratch = .allocate(byteCount: slot * slots, alignment: 16)
        headers = .allocate(capacity: slots > 1 ? slots : 0)
        vectors = .allocate(capacity: slots > 1 ? slots : 0)
        for index in headers.indices {
            vectors[index] = iovec(iov_base: scratch.baseAddress! + index * slot, iov_len: slot)
            var header = msghdr()
            header.msg_iov = vectors.baseAddress! + index
            header.msg_iovlen = 1
            headers[index] = able_mmsghdr(msg_hdr: header, msg_len: 0)
        }
        LargeSDUMemory.prepare(receiveMTU: receiveMTU)
    }

    deinit {
        scratch.deallocate()
        headers.deallocate()
        vectors.deallocate()
    }

    /// Receives one SDU, if one is there.
    package func receive() -> Outcome {
        if hasEnded { return .end(end) }
        // The `recvmmsg` call is looked up only when it is made: binding it here retained its
        // context on every call, also on the calls that answer from the last batch.
        if !headers.isEmpty { return receiveBatched() }
        return receiveOne()
    }

    /// Whether the next ``receive()`` will answer without asking the socket, because the SDUs
    /// received so far were all the socket held: the one just received came alone.
    package var tookAll: Bool { socketDrained && batch.next >= batch.count }

    /// One SDU through `recv(2)`.
    private func receiveOne() -> Outcome {
        while true {
            let result: SyscallResult<Int>
            var direct: [UInt8]?
            if expectsLargeSDU {
                var received = SyscallResult<Int>.success(0)
                direct = [UInt8](unsafeUninitializedCapacity: receiveMTU) { buffer, count in
                    received = operations.receive(socket, UnsafeMutableRawBufferPointer(buffer), CInt(MSG_TRUNC))
                    if case .success(let length) = received { count = min(length, receiveMTU) }
                }
                result = received
            } else {
                result = operations.receive(socket, scratch, CInt(MSG_TRUNC))
            }
            switch result {
            case .success(let length):
                if let ending = ending(forLength: length) { return ending }
                let large = receiveMTU > Self.directReceiveThreshold && length >= receiveMTU / 2
                defer { expectsLargeSDU = large }
                guard let direct else {
                    return .packet(storage.array(of: UnsafeRawBufferPointer(rebasing: scratch[..<length])))
                }
                // Keep the array the SDU arrived in only if the SDU fills half of it or more.
                return .packet(large ? direct : direct.withUnsafeBytes { storage.array(of: $0) })
            case .failure(let errno):
                if let outcome = failed(errno) { return outcome }
            }
        }
    }

    /// What a received length means when it is not an SDU: `0` is the end of the connection (an
    /// empty SDU would read the same, which is why `send` refuses to send one); over the MTU, a
    /// protocol error. `nil` for an SDU, decided inline: that is every call but the last.
    @inline(__always)
    private func ending(forLength length: Int) -> Outcome? {
        guard length == 0 || length > receiveMTU else { return nil }
        return ending(forNonSDULength: length)
    }

    private func ending(forNonSDULength length: Int) -> Outcome {
        if length == 0 { return ended(deferredError) }
        return ended(
            SocketError(
                .protocolViolation, message: "received an SDU of \(length) bytes, over the receive MTU of \(receiveMTU)"
            ))
    }

    /// What a receive that failed with `errno` gives: `nil` to try again (interrupted, or the
    /// first report of a reset, held back until the SDUs queued before it are out).
    private func failed(_ errno: Errno) -> Outcome? {
        if errno.isInterrupted { return nil }
        if errno.isWouldBlock {
            if hasDeferredError { return ended(deferredError) }
            return .wouldBlock
        }
        if errno.isDisconnection && !hasDeferredError {
            deferredError = SocketError(errno, while: "receiving on the L2CAP channel")
            return nil
        }
        return ended(deferredError ?? SocketError(errno, while: "receiving on the L2CAP channel"))
    }

    /// ``receive()`` through `recvmmsg`: the next SDU of the last batch, else a new batch.
    private func receiveBatched() -> Outcome {
        if batch.next < batch.count { return takeFromBatch() }
        if socketDrained {
            socketDrained = false
            if hasDeferredError { return ended(deferredError) }
            return .wouldBlock
        }
        if singleReceivesLeft > 0 {
            singleReceivesLeft -= 1
            return receiveSingle()
        }
        while true {
            // `headers` is not empty only when the operations have the call.
            guard let receiveMessages = operations.receiveMessages else { return receiveOne() }
            switch receiveMessages(socket, headers, CInt(MSG_TRUNC)) {
            case .success(let count):
                batch = (count, 0)
                socketDrained = count < headers.count
                loneBatches = count == 1 ? loneBatches + 1 : 0
                if loneBatches == Self.loneBatchesBeforeSingles {
                    loneBatches = 0
                    singleReceivesLeft = Self.singleReceivesPerProbe
                }
                return takeFromBatch()
            case .failure(let errno):
                if let outcome = failed(errno) { return outcome }
            }
        }
    }

    /// One SDU through `recv`, for a socket whose values come one at a time; after an SDU, the
    /// next call answers "would block" without asking the socket.
    private func receiveSingle() -> Outcome {
        let outcome = receiveOne()
        if case .packet = outcome { socketDrained = true }
        return outcome
    }

    /// The next SDU of the last `recvmmsg`'s batch.
    private func takeFromBatch() -> Outcome {
        let index = batch.next
        batch.next += 1
        let length = Int(headers[index].msg_len)
        if let ending = ending(forLength: length) {
            batch = (0, 0)
            return ending
        }
        let slot = vectors[index]
        return .packet(storage.array(of: UnsafeRawBufferPointer(start: slot.iov_base, count: length)))
    }

    /// For a consumer that found no SDU buffered: the next one if it is there, else `nil`. An
    /// end met here is left to the socket's read handler, which ``kickReader`` runs.
    package func receiveForConsumer() -> [UInt8]? {
        switch receive() {
        case .packet(let packet):
            return packet
        case .wouldBlock:
            return nil
        case .end:
            kickReader()
            return nil
        }
    }

    /// Takes back an SDU this receiver handed out, once its taker is done with it: if nobody else
    /// holds it, its storage receives the next SDU that fits (see ``ByteStorage``).
    package func recycle(_ value: consuming [UInt8]) {
        storage.recycle(value)
    }

    private func ended(_ error: SocketError?) -> Outcome {
        end = error
        hasEnded = true
        return .end(error)
    }
}
