package import AbleIO

/// A server end of LE credit-based channels: listens on a PSM and delivers the channels that
/// peers open to it.
///
/// ```swift
/// let listener = try await adapter.listenL2CAP(security: .medium)
/// publish(listener.psm)  // for example in a characteristic, as `listener.psm.bytes`
/// for try await channel in listener.channels {
///     Task { try await serve(channel) }
/// }
/// ```
///
/// Obtain one with ``Adapter/listenL2CAP(psm:security:receiveMTU:watermarks:)``. On BlueZ the
/// listener owns one nonblocking `AF_BLUETOOTH`/`SOCK_SEQPACKET`/`BTPROTO_L2CAP` socket; on the
/// simulator an `AF_UNIX` one. Either is watched by Able's sockets event loop, one thread shared
/// by every channel and listener of the process, which is also the actor's executor.
///
/// A listener outlives `bluetoothd`: the socket is the kernel's, and the daemon has no part in
/// listening or accepting, so a restart of the daemon leaves it listening (the channels it
/// accepted ride on links, which the restart ends). The kernel matches a listening socket to an
/// incoming channel by the adapter's address, so it keeps listening across the adapter being
/// powered off and on; a simulated radio keeps it across its stack restarts (`SimulatedRadio.restartStack(down:)`).
///
/// - Important: The listener stops listening when ``close()`` is called, when the last
///   reference to it goes away, or when the task that iterates ``channels`` is cancelled;
///   channels already accepted stay open.
///
/// The listener keeps no state of its own (its engine's lives on the loop): it is an actor for
/// its executor, that loop.
public actor L2CAPListener {
    /// The PSM peers connect to: the one asked for, or the dynamic one (`0x0080`–`0x00FF`) the
    /// kernel picked for ``PSM/automatic``.
    ///
    /// The corresponding kernel call is `getsockname(2)`.
    public nonisolated let psm: PSM

    /// The channels peers open, in the order they were accepted; see ``L2CAPChannelStream`` for
    /// its buffering and end.
    public nonisolated let channels: L2CAPChannelStream

    package nonisolated let core: ListenerCore<L2CAPChannel>

    /// Able's sockets event loop: the socket's handler runs there too.
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        core.loop.asUnownedSerialExecutor()
    }

    /// Takes over a socket that listens already, and starts accepting.
    ///
    /// - Parameters:
    ///   - socket: A bound, listening socket; the listener owns it from now on and closes it.
    ///   - psm: The PSM the socket listens on.
    ///   - watermarks: The accepted channels' watermarks.
    ///   - setUp: How an accepted socket's MTUs and peer are read.
    ///   - operations: The socket calls to make.
    package init(
        listeningSocket socket: CInt, psm: PSM, watermarks: L2CAPPacketStream.Watermarks,
        setUp: AcceptedChannelSetUp<L2CAPChannel>, operations: SocketOperations
    ) {
        core = ListenerCore(
            socket: socket, operations: operations,
            watermarks: watermarks.buffer, setUp: setUp)
        self.psm = psm
        channels = L2CAPChannelStream(buffer: core.channels)
    }

    /// A listener around a running engine, for ``offeringChannels(on:)``.
    init(psm: PSM, core: ListenerCore<L2CAPChannel>) {
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
