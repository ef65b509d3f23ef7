import AbleIO

extension L2CAPListener {
    /// A listener whose channels are handed to it through the returned ``L2CAPChannelOffer``
    /// rather than accepted from a kernel L2CAP socket: the simulator's, whose channels are
    /// AF_UNIX socketpairs.
    ///
    /// The listener still owns a listening socket, so that its engine, its closing and its
    /// stream are a Bluetooth listener's: an AF_UNIX `SOCK_SEQPACKET` socket bound to an address
    /// the kernel picks in the abstract namespace, which nobody connects to.
    ///
    /// - Parameter psm: The PSM the listener reports.
    /// - Returns: The listener, and the way to offer it channels.
    /// - Throws: ``BluetoothError`` when the socket cannot be made.
    package static func offeringChannels(on psm: PSM) throws -> (L2CAPListener, L2CAPChannelOffer) {
        let (socket, identity): (CInt, DescriptorIdentity)
        do {
            (socket, identity) = try LocalSockets.unconnectedListener()
        } catch {
            throw BluetoothError(error)
        }
        // Nobody connects to the socket, so nothing is ever accepted to be described.
        let setUp = AcceptedChannelSetUp<L2CAPChannel>(peerAddressSize: 0) { _, _, _ in
            throw BluetoothError(.notSupported, message: "channels are offered to this listener, not accepted")
        }
        let core = ListenerCore(
            socket: socket, operations: .system,
            watermarks: L2CAPPacketStream.Watermarks.default.buffer, setUp: setUp)
        return (L2CAPListener(psm: psm, core: core), L2CAPChannelOffer(core: core, socket: identity))
    }
}

/// The feeding end of a listener made by ``L2CAPListener/offeringChannels(on:)``.
///
/// It does not keep the listener alive: the listener closes when its last reference goes away,
/// as any other does, and ``isListening`` turns `false`.
package struct L2CAPChannelOffer: Sendable {
    fileprivate let core: ListenerCore<L2CAPChannel>
    fileprivate let socket: DescriptorIdentity

    /// Whether the listener still listens: its socket is not closed yet.
    package var isListening: Bool { socket.isOpen }

    /// Hands a channel to the listener's ``L2CAPListener/channels``, as if a peer had connected.
    ///
    /// - Returns: `false` when the listener is closed, or 16 offered channels wait for its
    ///   consumer (a full backlog, where the kernel refuses a connection): `channel` is then
    ///   still the caller's.
    package func offer(_ channel: L2CAPChannel) -> Bool {
        guard isListening else { return false }
        var taken = false
        _ = core.channels.produce {
            taken = true
            return channel
        }
        return taken
    }
}
