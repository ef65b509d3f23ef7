#if canImport(Glibc)
    import Glibc
#endif

/// The engine of an L2CAP listener (the public `L2CAPListener`): a listening, nonblocking L2CAP socket on the sockets'
/// event loop (``EventLoop/sockets``), whose read handler accepts the channels peers open and
/// hands them to the channel stream.
///
/// Thread safety: `channels` has its own lock; `isOpen`, `closeWaiters` and `isSocketClosed` are
/// touched only on the loop. Hence `@unchecked Sendable`.
package final class ListenerCore<Channel: Sendable>: @unchecked Sendable {
    package let socket: CInt
    package let operations: SocketOperations
    /// The loop the socket's handler and the owning actor run on.
    package let loop: EventLoop
    package let channels: WatermarkBuffer<Channel>
    package let channelWatermarks: BufferWatermarks
    package let setUp: AcceptedChannelSetUp<Channel>

    /// The socket's registration with the loop: reading while the stream has room.
    private let watch: LoopSocket
    private var isOpen = true
    private var closeWaiters: [UnsafeContinuation<Void, Never>] = []
    private var isSocketClosed = false

    /// How many accepted channels may wait for the consumer before the listener stops accepting.
    package static var acceptWatermarks: BufferWatermarks { BufferWatermarks(high: 16, low: 4) }

    /// Takes over a listening, nonblocking socket and starts accepting.
    package init(
        socket: CInt, operations: SocketOperations, loop: EventLoop = .sockets,
        watermarks: BufferWatermarks, setUp: AcceptedChannelSetUp<Channel>
    ) {
        self.socket = socket
        self.setUp = setUp
        self.operations = operations
        self.loop = loop
        self.channelWatermarks = watermarks
        let watch = LoopSocket(descriptor: socket, loop: loop)
        self.watch = watch
        let stopListening = LateCall()
        // Level-triggered: connections left pending when accepting resumes are reported again.
        channels = WatermarkBuffer(
            watermarks: .init(high: Self.acceptWatermarks.high, low: Self.acceptWatermarks.low),
            pauseProducer: { watch.set(.read, false) },
            resumeProducer: { watch.set(.read, true) },
            // Nobody takes channels any more: close the socket, so that peers are refused
            // rather than accepted and dropped.
            consumerCancelled: { stopListening() }
        )
        // Weak: the stream's buffer, which holds this closure, belongs to the core.
        stopListening.action = { [weak self] in self?.closeSoon() }
        // The handler holds the core until the watch is cancelled.
        watch.start(interest: .read, readable: { self.acceptAvailable() }, writable: {})
    }

    /// Accepts every pending connection, until none is left or the stream is full.
    private func acceptAvailable() {
        guard isOpen else { return }
        while true {
            var peer = [UInt8](repeating: 0, count: setUp.peerAddressSize)
            let result = peer.withUnsafeMutableBytes { buffer in
                operations.accept(socket, buffer)
            }
            switch result {
            case .success(let (accepted, length)):
                // A connection that cannot be set up is closed; the peer sees it end, the
                // listener goes on.
                let channel = peer.withUnsafeBytes {
                    try? makeChannel(accepted, peer: UnsafeRawBufferPointer(rebasing: $0[..<min(length, $0.count)]))
                }
                guard let channel else {
                    _ = operations.close(accepted)
                    continue
                }
                if channels.produce(channel) { return }
            case .failure(let errno) where errno.isInterrupted || errno.rawValue == ECONNABORTED:
                continue
            case .failure(let errno) where errno.isWouldBlock:
                return
            case .failure(let errno):
                finish(throwing: SocketError(errno, while: "accepting an L2CAP connection"))
                return
            }
        }
    }

    private func makeChannel(_ socket: CInt, peer: UnsafeRawBufferPointer) throws -> Channel {
        if case .failure(let errno) = operations.setNonblocking(socket) {
            throw SocketError(errno, while: "making the accepted socket nonblocking")
        }
        let accepted = try setUp.describe(socket, peer, operations)
        let core = ChannelCore(
            socket: socket, operations: operations, loop: loop, sendMTU: accepted.sendMTU,
            receiveMTU: accepted.receiveMTU, watermarks: channelWatermarks)
        return accepted.make(core)
    }

    /// Ends the stream and closes the socket; on the loop.
    private func finish(throwing error: SocketError?) {
        loop.checkIsolated()
        guard isOpen else { return }
        isOpen = false
        channels.finish(throwing: error)
        watch.cancel { self.socketReleased() }
    }

    /// The loop no longer watches the socket: close it; on the loop.
    private func socketReleased() {
        _ = operations.close(socket)
        isSocketClosed = true
        let waiters = closeWaiters
        closeWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    /// Stops listening and waits until the socket is closed.
    ///
    /// - Parameter actor: The owning listener, whose executor is the loop.
    package func close(isolation actor: isolated (any Actor)? = #isolation) async {
        finish(throwing: nil)
        await withUnsafeContinuation(isolation: actor) { continuation in
            if isSocketClosed {
                continuation.resume()
            } else {
                closeWaiters.append(continuation)
            }
        }
    }

    /// Starts closing, from anywhere, without waiting.
    package func closeSoon() {
        loop.execute { self.finish(throwing: nil) }
    }
}

/// How a listener learns what it needs of a socket it accepted, and makes its channel: the
/// kernel's L2CAP sockets report their MTUs through `getsockopt(2)` and their peer as a
/// `sockaddr_l2`, which the channel keeps.
package struct AcceptedChannelSetUp<Channel: Sendable>: Sendable {
    /// What a backend reads off an accepted socket.
    package struct Accepted {
        package var sendMTU: Int
        package var receiveMTU: Int
        /// Makes the channel around the accepted socket's engine.
        package var make: (ChannelCore) -> Channel

        package init(sendMTU: Int, receiveMTU: Int, make: @escaping (ChannelCore) -> Channel) {
            self.sendMTU = sendMTU
            self.receiveMTU = receiveMTU
            self.make = make
        }
    }

    /// The size of the peer address that `accept(2)` fills in.
    package var peerAddressSize: Int
    /// Reads the accepted socket's MTUs and its peer from the address `accept(2)` gave.
    package var describe:
        @Sendable (_ socket: CInt, _ peerAddress: UnsafeRawBufferPointer, _ operations: SocketOperations) throws ->
            Accepted

    package init(
        peerAddressSize: Int,
        describe: @escaping @Sendable (CInt, UnsafeRawBufferPointer, SocketOperations) throws -> Accepted
    ) {
        self.peerAddressSize = peerAddressSize
        self.describe = describe
    }
}
