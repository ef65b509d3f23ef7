package import AbleIO

/// An L2CAP connection-oriented channel: a reliable, ordered exchange of SDUs (packets) with one
/// peer, over an LE credit-based connection.
///
/// Get one by opening a channel to a peer's PSM with
/// ``Peripheral/openL2CAPChannel(psm:security:receiveMTU:watermarks:timeout:)``, or from an
/// ``L2CAPListener`` that a peer connected to. Then send with ``send(_:)`` and receive from
/// ``packets``:
///
/// ```swift
/// let channel = try await peripheral.openL2CAPChannel(psm: psm)
/// try await channel.send(Array("ping".utf8))
/// for try await packet in channel.packets {
///     print(packet)
/// }
/// await channel.close()
/// ```
///
/// Each SDU arrives whole: one ``send(_:)`` is one element of ``packets`` on the other side.
/// The kernel segments SDUs into LE frames and enforces the MTUs; ``sendMTU`` is the largest
/// SDU the peer accepts, ``receiveMTU`` the largest it may send.
///
/// The channel owns one nonblocking `SOCK_SEQPACKET` socket (on BlueZ an `AF_BLUETOOTH`/
/// `BTPROTO_L2CAP` one, on the simulator an `AF_UNIX` one), watched by Able's sockets event loop:
/// one thread, shared by every channel and listener of the process, that waits in `epoll_pwait`
/// and is also the actor's executor. Sending and receiving do not hop to the actor: they take a
/// lock and call the socket from the caller's executor. An actor of yours that sends or receives
/// a lot can share the channel's executor, so that a send or receive that had to wait resumes on
/// the thread that served the socket, without a hop:
///
/// ```swift
/// actor Echo {
///     let channel: L2CAPChannel
///     nonisolated var unownedExecutor: UnownedSerialExecutor { channel.unownedExecutor }
///
///     init(channel: L2CAPChannel) { self.channel = channel }
///
///     func run() async throws {
///         for try await packet in channel.packets { try await channel.send(packet) }
///     }
/// }
/// ```
///
/// - Important: The channel closes when ``close()`` is called, when either side closes it, when
///   the link is lost, or when the last reference to the channel goes away; ``packets`` alone
///   does not keep it open.
///
/// The channel keeps no state of its own (its engine's lives on the loop or behind locks): it is
/// an actor for its executor, that loop, which actors of yours can share as above. Code that runs
/// there must not block: while it runs, no socket of the process is served.
public actor L2CAPChannel {
    /// The largest SDU the peer accepts, in bytes: the most ``send(_:)`` can send at once.
    ///
    /// On a Bluetooth link it is the peer's MTU from the LE Credit Based Connection exchange; the
    /// corresponding kernel call is `getsockopt(SOL_BLUETOOTH, BT_SNDMTU)`.
    public nonisolated let sendMTU: Int

    /// The largest SDU the peer may send, in bytes.
    ///
    /// The corresponding kernel call is `getsockopt(SOL_BLUETOOTH, BT_RCVMTU)`.
    public nonisolated let receiveMTU: Int

    /// The SDUs the peer sends, one element per SDU, in order; see ``L2CAPPacketStream`` for its
    /// buffering and end.
    public nonisolated let packets: L2CAPPacketStream

    /// The peer's address, when the channel runs over Bluetooth.
    public nonisolated let peerAddress: BluetoothAddress?

    /// Whether ``peerAddress`` is public or random, when the channel runs over Bluetooth.
    public nonisolated let peerAddressType: BluetoothAddress.AddressType?

    package nonisolated let core: ChannelCore

    /// Able's sockets event loop: the socket's handlers run there too.
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        core.loop.asUnownedSerialExecutor()
    }

    package init(
        core: ChannelCore, peerAddress: BluetoothAddress? = nil, peerAddressType: BluetoothAddress.AddressType? = nil
    ) {
        self.core = core
        self.sendMTU = core.sendMTU
        self.receiveMTU = core.receiveMTU
        self.packets = L2CAPPacketStream(buffer: core.packets)
        self.peerAddress = peerAddress
        self.peerAddressType = peerAddressType
    }

    deinit {
        core.closeSoon()
    }

    /// Sends one SDU, waiting while the socket's buffer (and, on a Bluetooth link, the peer's LE
    /// credits) has no room for it.
    ///
    /// Sends complete in the order they were made and are never dropped: when the socket is
    /// full, the send waits until the socket can take the SDU whole, and later sends queue
    /// behind it. The caller does not leave its actor unless it has to wait.
    ///
    /// - Parameter packet: The SDU: 1 to ``sendMTU`` bytes.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/valueTooLong`` for an SDU over
    ///   ``sendMTU``, ``BluetoothError/Code/invalidArguments`` for an empty one,
    ///   ``BluetoothError/Code/notConnected`` after ``close()``,
    ///   ``BluetoothError/Code/disconnected`` once the peer has closed or reset the channel or the
    ///   link is lost. `CancellationError` when the task is cancelled while the send waits.
    ///
    /// The corresponding kernel call is `send(2)` with `MSG_NOSIGNAL`; the kernel takes an SDU
    /// whole or not at all.
    ///
    /// - Important: Cancelling a send that waits sends nothing of its SDU; the SDUs after it are
    ///   unaffected.
    public nonisolated(nonsending) func send(_ packet: [UInt8]) async throws {
        do { try await core.send(packet) } catch { throw BluetoothError.publishing(error) }
    }

    /// Sends several SDUs, in order, each whole: the cheapest way to stream small SDUs.
    ///
    /// Where ``send(_:)`` resumes the caller once per SDU, this resumes it once, when the socket
    /// has taken the last SDU: the channel's event loop puts them into the socket as it makes
    /// room, several per `sendmmsg(2)` call. Sends made meanwhile queue behind the whole batch.
    ///
    /// Every SDU is checked before any is sent: one that is empty or over ``sendMTU`` fails the
    /// call and nothing goes out.
    ///
    /// - Parameter packets: The SDUs, each 1 to ``sendMTU`` bytes; an empty array sends nothing.
    /// - Throws: As ``send(_:)``. When it throws after the checks (the peer closed, the task was
    ///   cancelled), the SDUs before the one that failed went into the socket and none after it.
    ///
    /// - Important: Cancelling the call while it waits drops the SDUs still queued; those the
    ///   socket took are sent.
    public nonisolated(nonsending) func send(contentsOf packets: [[UInt8]]) async throws {
        do { try await core.send(contentsOf: packets) } catch { throw BluetoothError.publishing(error) }
    }

    /// Closes the channel and waits until its socket is closed.
    ///
    /// ``packets`` delivers the SDUs that had arrived, then ends; waiting and later sends throw
    /// ``BluetoothError/Code/notConnected``. Closing a closed channel does nothing.
    ///
    /// The corresponding kernel call is `close(2)`, which sends the peer an L2CAP Disconnection
    /// Request on a Bluetooth link.
    public func close() async {
        await core.close()
    }
}

extension L2CAPChannel {
    /// Wraps a connected socket, for the simulator and tests: one end of
    /// `socketpair(AF_UNIX, SOCK_SEQPACKET)`, or an L2CAP socket connected elsewhere.
    ///
    /// - Parameters:
    ///   - socket: A connected `SOCK_SEQPACKET` socket; made nonblocking here. The channel owns it
    ///     from now on and closes it.
    ///   - sendMTU: The largest SDU to send.
    ///   - receiveMTU: The largest SDU the peer may send; the size of the receive buffer.
    ///   - watermarks: When to stop and restart reading.
    ///   - operations: The socket calls to make.
    ///   - peerAddress: The peer's address, if the socket is an L2CAP one.
    ///   - peerAddressType: Whether `peerAddress` is public or random.
    ///   - directReceiver: Takes the received SDUs on the socket's queue instead of ``packets``.
    /// - Returns: The channel, receiving.
    /// - Throws: ``BluetoothError`` if the socket cannot be made nonblocking; the socket is then
    ///   still the caller's.
    package static func wrapping(
        socket: CInt,
        sendMTU: Int,
        receiveMTU: Int,
        watermarks: L2CAPPacketStream.Watermarks = .default,
        operations: SocketOperations = .system,
        peerAddress: BluetoothAddress? = nil,
        peerAddressType: BluetoothAddress.AddressType? = nil,
        directReceiver: ChannelCore.DirectReceiver? = nil
    ) throws -> L2CAPChannel {
        precondition(sendMTU >= 1 && receiveMTU >= 1, "MTUs must be at least 1 byte")
        if case .failure(let errno) = operations.setNonblocking(socket) {
            throw BluetoothError(errno, while: "making the socket nonblocking")
        }
        let core = ChannelCore(
            socket: socket, operations: operations, sendMTU: sendMTU, receiveMTU: receiveMTU,
            watermarks: watermarks.buffer, directReceiver: directReceiver)
        return L2CAPChannel(core: core, peerAddress: peerAddress, peerAddressType: peerAddressType)
    }

    /// Makes two channels connected to each other over `socketpair(AF_UNIX, SOCK_SEQPACKET)`.
    ///
    /// AF_UNIX `SOCK_SEQPACKET` refuses (`EMSGSIZE`) a message longer than the sender's
    /// `SO_SNDBUF` less 32 bytes, and that buffer also bounds the bytes in flight (each message
    /// counts its kernel overhead too, several hundred bytes). So the pair sets `SO_SNDBUF` on
    /// both ends to `socketBufferSize`, which the kernel doubles and caps at twice
    /// `net.core.wmem_max` (212,992 on a default Debian kernel), and checks that an `mtu`-byte
    /// SDU fits.
    ///
    /// - Parameters:
    ///   - mtu: The send and receive MTU of both channels.
    ///   - watermarks: The watermarks of both channels.
    ///   - socketBufferSize: The `SO_SNDBUF` to ask for.
    ///   - operations: The socket calls of both channels.
    /// - Returns: Two connected channels.
    /// - Throws: ``BluetoothError`` if the socketpair cannot be made or cannot carry `mtu`-byte SDUs.
    package static func makePair(
        mtu: Int = 65_535,
        watermarks: L2CAPPacketStream.Watermarks = .default,
        socketBufferSize: Int = 256 * 1024,
        operations: SocketOperations = .system
    ) throws -> (L2CAPChannel, L2CAPChannel) {
        let (first, second) = try makeSocketPair(mtu: mtu, socketBufferSize: socketBufferSize, operations: operations)
        let a: L2CAPChannel
        do {
            a = try wrapping(
                socket: first, sendMTU: mtu, receiveMTU: mtu, watermarks: watermarks, operations: operations)
        } catch {
            _ = operations.close(first)
            _ = operations.close(second)
            throw error
        }
        do {
            let b = try wrapping(
                socket: second, sendMTU: mtu, receiveMTU: mtu, watermarks: watermarks, operations: operations)
            return (a, b)
        } catch {
            // `a` owns `first` and closes it when it goes away.
            _ = operations.close(second)
            throw error
        }
    }

    /// Makes a nonblocking AF_UNIX `SOCK_SEQPACKET` socketpair that carries `mtu`-byte SDUs; see
    /// ``makePair(mtu:watermarks:socketBufferSize:operations:)``, and AbleIO's
    /// `LocalSockets.seqpacketPair(mtu:socketBufferSize:operations:)`, which makes it.
    package static func makeSocketPair(
        mtu: Int,
        socketBufferSize: Int = 256 * 1024,
        operations: SocketOperations = .system
    ) throws -> (CInt, CInt) {
        do {
            return try LocalSockets.seqpacketPair(mtu: mtu, socketBufferSize: socketBufferSize, operations: operations)
        } catch {
            throw BluetoothError(error)
        }
    }

    // MARK: Observation, for tests and benchmarks

    /// How many received SDUs wait in ``packets``.
    package nonisolated var bufferedPacketCount: Int { core.packets.bufferedCount }

    /// Whether the channel has stopped reading its socket because ``packets`` is full.
    package nonisolated var isReadingPaused: Bool { core.packets.isProducerPaused }

    /// How many times the channel stopped reading because ``packets`` was full.
    package nonisolated var readPauseCount: Int { core.packets.pauseCount }

    /// How many times an iteration of ``packets`` found it empty and waited.
    package nonisolated var receiveWaitCount: Int { core.packets.waitCount }

    /// How many times an iteration of ``packets`` received for itself, and how many times the
    /// read source stepped aside for it.
    package nonisolated var receiveFetchCounts: (consumer: Int, stepAside: Int) { core.packets.fetchCounts }

    /// How many bytes sent into the socket its peer has not read yet; see `ChannelCore`'s
    /// `unreadByteCount`.
    package nonisolated var unreadByteCount: Int { core.unreadByteCount }

    /// How many sends have had to wait for room in the socket.
    package nonisolated var sendWaitCount: Int { core.sendWaitCount }

    /// How many sends wait for room now.
    package nonisolated var pendingSendCount: Int { core.pendingSendCount }

    /// The most SDUs one run of the socket's read handler has received before letting the
    /// channel's queue do other work.
    package nonisolated var longestReadRun: Int { core.longestReadRun }
}

extension L2CAPPacketStream.Watermarks {
    /// The same watermarks, for the engine's buffer.
    package var buffer: BufferWatermarks { BufferWatermarks(high: high, low: low) }
}
