/// How an L2CAP channel or listener is set up, whichever backend opens it.
package struct L2CAPOptions: Sendable {
    package var security: L2CAPChannel.SecurityLevel
    package var receiveMTU: Int?
    package var watermarks: L2CAPPacketStream.Watermarks

    package init(
        security: L2CAPChannel.SecurityLevel = .low, receiveMTU: Int? = nil,
        watermarks: L2CAPPacketStream.Watermarks = .default
    ) {
        self.security = security
        self.receiveMTU = receiveMTU
        self.watermarks = watermarks
    }
}

extension Adapter {
    /// Listens for LE credit-based channels that peers open to this adapter.
    ///
    /// ```swift
    /// let listener = try await adapter.listenL2CAP()
    /// // publish listener.psm, for example through a characteristic
    /// for try await channel in listener.channels {
    ///     // … serve the channel …
    /// }
    /// ```
    ///
    /// On BlueZ the listener is a kernel L2CAP socket bound to this adapter's address (`socket`,
    /// `bind`, `setsockopt(BT_SECURITY, BT_RCVMTU)`, `listen`, then `accept` for each peer); on
    /// a simulated radio the channels run over `AF_UNIX`/`SOCK_SEQPACKET` socketpairs through the
    /// same ``L2CAPChannel`` code.
    ///
    /// - Parameters:
    ///   - psm: The PSM to listen on: ``PSM/automatic`` for a free dynamic one (then read
    ///     ``L2CAPListener/psm``), or a fixed one.
    ///   - security: The security a peer's link must have.
    ///   - receiveMTU: The largest SDU accepted channels take (23 to 65,535), or `nil` for the
    ///     default.
    ///   - watermarks: The accepted channels' watermarks; see ``L2CAPPacketStream``.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/alreadyExists`` when the PSM is taken
    ///   (`EADDRINUSE`), ``BluetoothError/Code/notReady`` when the adapter is powered off or
    ///   absent, ``BluetoothError/Code/notPermitted`` for a SIG-assigned PSM without
    ///   `CAP_NET_BIND_SERVICE`, ``BluetoothError/Code/invalidArguments`` for an MTU out of range
    ///   or a PSM outside the LE ranges, ``BluetoothError/Code/notSupported`` where the kernel has
    ///   no Bluetooth.
    public func listenL2CAP(
        psm: PSM = .automatic,
        security: L2CAPChannel.SecurityLevel = .low,
        receiveMTU: Int? = nil,
        watermarks: L2CAPPacketStream.Watermarks = .default
    ) async throws -> L2CAPListener {
        try InputChecks.listeningPSM(psm)
        try InputChecks.receiveMTU(receiveMTU)
        return try await backend.listenL2CAP(
            psm: psm, L2CAPOptions(security: security, receiveMTU: receiveMTU, watermarks: watermarks))
    }
}

extension Peripheral {
    /// Opens an LE credit-based channel to a PSM the peripheral listens on.
    ///
    /// ```swift
    /// let psm = try #require(PSM(bytes: try await peripheral.read(Characteristics.psm)))
    /// let channel = try await peripheral.openL2CAPChannel(psm: psm)
    /// try await channel.send(Array("hello".utf8))
    /// ```
    ///
    /// On BlueZ this is a kernel L2CAP socket connected from the peripheral's adapter, with the
    /// address type BlueZ knows for the peripheral (the kernel creates the LE link if there is
    /// none, and raises its security first, pairing if needed); on a simulated radio it is a
    /// socketpair to the peripheral's listener. On timeout or cancellation the socket is closed,
    /// which makes the kernel stop connecting.
    ///
    /// - Parameters:
    ///   - psm: The peripheral's PSM, usually one it published.
    ///   - security: The security the link must have before the channel opens.
    ///   - receiveMTU: The largest SDU to accept (23 to 65,535), or `nil` for the default.
    ///   - watermarks: When the channel stops and restarts reading; see ``L2CAPPacketStream``.
    ///   - timeout: How long opening may take.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/connectionAttemptFailed`` when nothing
    ///   listens on `psm`, ``BluetoothError/Code/timeout`` after `timeout`,
    ///   ``BluetoothError/Code/notPermitted`` when the peripheral demands more security;
    ///   ``BluetoothError/Code/invalidArguments`` for ``PSM/automatic``, a PSM outside the LE
    ///   ranges, an MTU out of range or a negative timeout, before opening a socket;
    ///   `CancellationError` when the task is cancelled.
    public func openL2CAPChannel(
        psm: PSM,
        security: L2CAPChannel.SecurityLevel = .low,
        receiveMTU: Int? = nil,
        watermarks: L2CAPPacketStream.Watermarks = .default,
        timeout: Duration = .seconds(30)
    ) async throws -> L2CAPChannel {
        try InputChecks.peerPSM(psm)
        try InputChecks.receiveMTU(receiveMTU)
        try InputChecks.timeout(timeout, of: "opening a channel")
        return try await backend.openL2CAPChannel(
            psm: psm, L2CAPOptions(security: security, receiveMTU: receiveMTU, watermarks: watermarks),
            timeout: timeout)
    }
}
