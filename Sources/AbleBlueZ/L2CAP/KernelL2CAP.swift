package import AbleCore
package import AbleIO

/// The kernel's L2CAP sockets: the channels and listeners that
/// `Peripheral.openL2CAPChannel` and `Adapter.listenL2CAP` give on BlueZ.
///
/// The socket calls are AbleIO's (`L2CAPSocket`, `PendingConnect`, `ChannelCore`); this layer
/// names the errors in the public API's terms and wraps the sockets in the public types.
package enum KernelL2CAP {
    /// Opens an LE credit-based channel to a PSM on a peer.
    ///
    /// The kernel creates the LE link to the peer if there is none (or uses the one BlueZ made
    /// with ``Peripheral/connect(timeout:)``), raises its security to `security` (pairing if
    /// needed), and sends an LE Credit Based Connection Request for `psm`.
    ///
    /// - Parameters:
    ///   - address: The peer's address.
    ///   - type: Whether `address` is public or random, as the peer advertises it.
    ///   - psm: The peer's PSM, usually a dynamic one it published.
    ///   - adapterAddress: The public address of the local adapter to connect from, or `nil` for
    ///     the one the kernel routes to the peer.
    ///   - security: The security the link must have before the channel opens.
    ///   - receiveMTU: The largest SDU to accept (23 to 65,535), or `nil` for the kernel's default.
    ///   - watermarks: When the channel stops and restarts reading; see ``L2CAPPacketStream``.
    ///   - timeout: How long the connection may take, link and pairing included.
    ///   - operations: The socket calls to make: the C library's, or a test's.
    /// - Returns: The connected channel.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/timeout`` after `timeout`;
    ///   ``BluetoothError/Code/connectionAttemptFailed`` when the peer refuses (no server on
    ///   `psm`, `ECONNREFUSED`) or does not answer; ``BluetoothError/Code/notPermitted`` when the
    ///   peer demands more security (`EACCES`); ``BluetoothError/Code/invalidArguments`` for an
    ///   address type other than public or random or an MTU out of range;
    ///   ``BluetoothError/Code/notSupported`` where the kernel has no Bluetooth.
    ///   `CancellationError` when the task is cancelled.
    ///
    /// The corresponding kernel calls are `socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP)`,
    /// `bind(2)` with `BDADDR_LE_PUBLIC`, `setsockopt(BT_SECURITY)`, `setsockopt(BT_RCVMTU)`, a
    /// nonblocking `connect(2)` with a `sockaddr_l2`, then `getsockopt(BT_SNDMTU, BT_RCVMTU)`.
    ///
    /// - Important: On timeout or cancellation the socket is closed, which makes the kernel stop
    ///   connecting (and drop a link it made only for this channel).
    package static func connect(
        to address: BluetoothAddress,
        type: BluetoothAddress.AddressType,
        psm: PSM,
        from adapterAddress: BluetoothAddress?,
        security: L2CAPChannel.SecurityLevel,
        receiveMTU: Int?,
        watermarks: L2CAPPacketStream.Watermarks,
        timeout: Duration,
        operations: SocketOperations = .system
    ) async throws -> L2CAPChannel {
        guard psm != .automatic else {
            throw BluetoothError(.invalidArguments, message: "connect to a PSM the peer listens on, not PSM 0")
        }
        let destination = try L2CAPSocketAddress(address: address, type: type, psm: psm)
        let source = L2CAPSocketAddress(
            address: adapterAddress, addressType: try L2CAPSocketAddress.kernelType(.public), psm: .automatic)
        let socket = try published { () throws(SocketError) in try L2CAPSocket.open(operations) }
        do {
            try L2CAPSocket.bind(socket, to: source, psmName: "\(source.psm)", operations)
            if security != .low {
                try L2CAPSocket.setSecurity(
                    socket, level: security.rawValue, levelName: "\(security)", operations)
            }
            if let receiveMTU { try L2CAPSocket.setReceiveMTU(socket, receiveMTU, operations) }
            let describe: @Sendable (Errno) -> BluetoothError = { errno in
                connectionError(errno, address: address, psm: psm)
            }
            let started = destination.withUnsafeBytes { bytes in
                SocketOperations.retryingInterrupts { operations.connect(socket, bytes) }
            }
            switch started {
            case .success:
                break
            case .failure(let errno) where errno == .inProgress || errno.isWouldBlock:
                do {
                    try await PendingConnect.wait(
                        socket: socket, operations: operations, timeout: timeout,
                        describe: describe)
                } catch {
                    // The engine's own errors (its timeout) reach users as BluetoothError too.
                    guard let error = BluetoothError.publishing(error) as? BluetoothError else { throw error }
                    throw securityRefusal(socket, asked: security, after: error, operations, address: address, psm: psm)
                        ?? error
                }
            case .failure(let errno):
                throw describe(errno)
            }
            let mtus = try L2CAPSocket.mtus(socket, operations)
            let core = ChannelCore(
                socket: socket, operations: operations, sendMTU: mtus.send,
                receiveMTU: mtus.receive, watermarks: watermarks.buffer)
            return L2CAPChannel(core: core, peerAddress: address, peerAddressType: type)
        } catch {
            L2CAPSocket.abandon(socket, operations)
            throw BluetoothError.publishing(error)
        }
    }

    private static func connectionError(_ errno: Errno, address: BluetoothAddress, psm: PSM) -> BluetoothError {
        let target = "\(address) on \(psm)"
        switch errno {
        case .connectionRefused:
            return BluetoothError(
                .connectionAttemptFailed,
                message: "\(target) refused the L2CAP connection: nothing listens there, or it lacks resources",
                cause: errno)
        case .permissionDenied, .operationNotPermitted:
            return BluetoothError(
                .notPermitted, message: "\(target) requires more security for this L2CAP channel", cause: errno)
        case .timedOut, .hostDown, .hostUnreachable, .connectionReset, .connectionAborted:
            return BluetoothError(
                .connectionAttemptFailed, message: "the L2CAP connection to \(target) failed: \(errno)", cause: errno)
        default:
            return BluetoothError(errno, while: "connecting to \(target)")
        }
    }

    /// The error for a connection the peer refused for want of security, if `error` was one.
    ///
    /// A peer that demands more security answers "insufficient authentication" or "insufficient
    /// encryption", and the kernel then raises the socket's `BT_SECURITY` level above the one
    /// asked for and ends the attempt. How it ends depends on the controller's Disconnection
    /// Complete: with `EACCES` where the local side's reason is passed through (BlueZ 5.66's
    /// emulator), with `ECONNABORTED` where the controller reports "Connection Terminated By
    /// Local Host" as real controllers do (BlueZ 5.82's emulator, `emulator/btdev.c`). The raised
    /// level tells the second case apart from a link that was merely lost.
    private static func securityRefusal(
        _ socket: CInt, asked: L2CAPChannel.SecurityLevel, after error: BluetoothError,
        _ operations: SocketOperations, address: BluetoothAddress, psm: PSM
    ) -> BluetoothError? {
        guard let errno = error.cause as? Errno, errno == .connectionAborted || errno == .connectionReset,
            let level = L2CAPSocket.securityLevel(socket, operations), level > asked.rawValue
        else { return nil }
        return BluetoothError(
            .notPermitted, message: "\(address) on \(psm) requires more security for this L2CAP channel",
            cause: errno)
    }

    /// Starts listening for LE credit-based channels.
    ///
    /// - Parameters:
    ///   - psm: The PSM to listen on: ``PSM/automatic`` for a free dynamic one (then read the
    ///     listener's `psm`), or a fixed one (SIG-assigned PSMs below `0x0080` need
    ///     `CAP_NET_BIND_SERVICE`).
    ///   - adapterAddress: The public address of the local adapter to listen on, or `nil` for all.
    ///   - security: The security a peer's link must have; the kernel refuses peers below it.
    ///   - receiveMTU: The largest SDU the accepted channels accept (23 to 65,535), or `nil` for
    ///     the kernel's default.
    ///   - watermarks: The accepted channels' watermarks.
    ///   - backlog: How many connections the kernel completes before they are accepted.
    ///   - operations: The socket calls to make: the C library's, or a test's.
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
    package static func listen(
        psm: PSM = .automatic,
        adapterAddress: BluetoothAddress? = nil,
        security: L2CAPChannel.SecurityLevel = .low,
        receiveMTU: Int? = nil,
        watermarks: L2CAPPacketStream.Watermarks = .default,
        backlog: Int = 8,
        operations: SocketOperations = .system
    ) throws -> L2CAPListener {
        guard psm == .automatic || psm.isFixed || psm.isDynamic else {
            throw BluetoothError(
                .invalidArguments, message: "\(psm) is not an LE PSM: use 0x0001–0x00FF, or automatic")
        }
        let socket = try published { () throws(SocketError) in try L2CAPSocket.open(operations) }
        do {
            let local = L2CAPSocketAddress(
                address: adapterAddress, addressType: try L2CAPSocketAddress.kernelType(.public), psm: psm)
            try L2CAPSocket.bind(socket, to: local, psmName: "\(psm)", operations)
            if security != .low {
                try L2CAPSocket.setSecurity(
                    socket, level: security.rawValue, levelName: "\(security)", operations)
            }
            if let receiveMTU { try L2CAPSocket.setReceiveMTU(socket, receiveMTU, operations) }
            if case .failure(let errno) = operations.listen(socket, CInt(clamping: max(backlog, 1))) {
                throw BluetoothError(errno, while: "listening on \(psm)")
            }
            let bound = try L2CAPSocket.localAddress(socket, operations)
            return L2CAPListener(
                listeningSocket: socket, psm: bound.psm, watermarks: watermarks, setUp: acceptedChannel,
                operations: operations)
        } catch {
            L2CAPSocket.abandon(socket, operations)
            throw BluetoothError.publishing(error)
        }
    }

    /// How an accepted kernel L2CAP socket is read: its MTUs, and its peer from a `sockaddr_l2`.
    static let acceptedChannel = AcceptedChannelSetUp<L2CAPChannel>(peerAddressSize: L2CAPSocketAddress.size) {
        socket, peerAddress, operations in
        let mtus = try L2CAPSocket.mtus(socket, operations)
        let peer = L2CAPSocketAddress(bytes: peerAddress)
        let peerAddressType = peer.flatMap { L2CAPSocketAddress.addressType(kernelType: $0.addressType) }
        return AcceptedChannelSetUp<L2CAPChannel>.Accepted(sendMTU: mtus.send, receiveMTU: mtus.receive) { core in
            L2CAPChannel(core: core, peerAddress: peer?.address, peerAddressType: peerAddressType)
        }
    }

    /// Runs a step of AbleIO's socket set-up, throwing its error as the public ``BluetoothError``.
    private static func published<T>(_ step: () throws(SocketError) -> T) throws(BluetoothError) -> T {
        do { return try step() } catch { throw BluetoothError(error) }
    }
}
