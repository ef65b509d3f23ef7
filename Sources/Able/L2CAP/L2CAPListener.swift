/// A server end of LE credit-based channels: listens on a PSM and delivers the channels that
/// peers open to it.
///
/// ```swift
/// let listener = try L2CAPListener(psm: .automatic, security: .medium)
/// publish(listener.psm)  // for example in a characteristic, as `listener.psm.bytes`
/// for try await channel in listener.channels {
///     Task { try await serve(channel) }
/// }
/// ```
///
/// The listener owns one nonblocking `AF_BLUETOOTH`/`SOCK_SEQPACKET`/`BTPROTO_L2CAP` socket,
/// driven by a dispatch read source on the listener's serial queue, which is also the actor's
/// executor.
///
/// - Important: The listener stops listening when ``close()`` is called or when the last
///   reference to it goes away; channels already accepted stay open.
public actor L2CAPListener {
    /// The PSM peers connect to: the one asked for, or the dynamic one (`0x0080`–`0x00FF`) the
    /// kernel picked for ``PSM/automatic``.
    ///
    /// The corresponding kernel call is `getsockname(2)`.
    public nonisolated let psm: PSM

    /// The channels peers open, in the order they were accepted; see ``L2CAPChannelStream`` for
    /// its buffering and end.
    public nonisolated let channels: L2CAPChannelStream

    nonisolated let core: ListenerCore

    /// The listener's serial queue: its socket's dispatch source runs there too.
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        core.executor.asUnownedSerialExecutor()
    }

    /// Starts listening for LE credit-based channels.
    ///
    /// - Parameters:
    ///   - psm: The PSM to listen on: ``PSM/automatic`` for a free dynamic one (then read
    ///     ``psm``), or a fixed one (SIG-assigned PSMs below `0x0080` need
    ///     `CAP_NET_BIND_SERVICE`).
    ///   - adapterAddress: The public address of the local adapter to listen on, or `nil` for all.
    ///   - security: The security a peer's link must have; the kernel refuses peers below it
    ///     (see ``L2CAPChannel/SecurityLevel``).
    ///   - receiveMTU: The largest SDU the accepted channels accept (23 to 65,535), or `nil` for
    ///     the kernel's default.
    ///   - watermarks: The accepted channels' watermarks; see ``L2CAPPacketStream``.
    ///   - backlog: How many connections the kernel completes before they are accepted.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/alreadyExists`` when the PSM is taken
    ///   (`EADDRINUSE`), ``BluetoothError/Code/notPermitted`` for a SIG-assigned PSM without the
    ///   capability (`EACCES`), ``BluetoothError/Code/invalidArguments`` for an MTU out of range
    ///   or a PSM outside the LE ranges, ``BluetoothError/Code/notSupported`` where the kernel
    ///   has no Bluetooth.
    ///
    /// The corresponding kernel calls are `socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP)`,
    /// `bind(2)` with `BDADDR_LE_PUBLIC` and the PSM, `setsockopt(BT_SECURITY)`,
    /// `setsockopt(BT_RCVMTU)`, `listen(2)` and `getsockname(2)`; each peer's channel comes from
    /// `accept(2)`.
    public init(
        psm: PSM = .automatic,
        adapterAddress: BluetoothAddress? = nil,
        security: L2CAPChannel.SecurityLevel = .low,
        receiveMTU: Int? = nil,
        watermarks: L2CAPPacketStream.Watermarks = .default,
        backlog: Int = 8
    ) throws {
        try self.init(
            psm: psm, adapterAddress: adapterAddress, security: security, receiveMTU: receiveMTU,
            watermarks: watermarks, backlog: backlog, operations: .system)
    }

    /// ``init(psm:adapterAddress:security:receiveMTU:watermarks:backlog:)`` through the given
    /// socket calls, for tests.
    package init(
        psm: PSM,
        adapterAddress: BluetoothAddress?,
        security: L2CAPChannel.SecurityLevel,
        receiveMTU: Int?,
        watermarks: L2CAPPacketStream.Watermarks,
        backlog: Int,
        operations: SocketOperations
    ) throws {
        guard psm == .automatic || psm.isFixed || psm.isDynamic else {
            throw BluetoothError(
                .invalidArguments, message: "\(psm) is not an LE PSM: use 0x0001–0x00FF, or automatic")
        }
        let socket = try L2CAPSocket.open(operations)
        do {
            let local = L2CAPSocketAddress(
                address: adapterAddress, addressType: try L2CAPSocketAddress.kernelType(.public), psm: psm)
            try L2CAPSocket.bind(socket, to: local, operations)
            if security != .low { try L2CAPSocket.setSecurity(socket, security, operations) }
            if let receiveMTU { try L2CAPSocket.setReceiveMTU(socket, receiveMTU, operations) }
            if case .failure(let errno) = operations.listen(socket, CInt(clamping: max(backlog, 1))) {
                throw BluetoothError(errno, while: "listening on \(psm)")
            }
            let bound = try L2CAPSocket.localAddress(socket, operations)
            core = ListenerCore(
                socket: socket, operations: operations, executor: SocketQueue(label: "Able.L2CAPListener"),
                watermarks: watermarks)
            self.psm = bound.psm
            channels = L2CAPChannelStream(buffer: core.channels)
        } catch {
            L2CAPSocket.abandon(socket, operations)
            throw error
        }
    }

    /// A listener around a running engine, for ``offeringChannels(on:)``.
    init(psm: PSM, core: ListenerCore) {
        self.core = core
        self.psm = psm
        channels = L2CAPChannelStream(buffer: core.channels)
    }

    deinit {
        core.closeSoon()
    }

    /// Stops listening and waits until the socket is closed.
    ///
    /// ``channels`` delivers the channels accepted before, then ends. Closing a closed listener
    /// does nothing.
    ///
    /// The corresponding kernel call is `close(2)`; the kernel refuses connections still in the
    /// backlog.
    public func close() async {
        await core.close()
    }
}
