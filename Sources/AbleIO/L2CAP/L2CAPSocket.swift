import CBluetooth

#if canImport(Glibc)
    import Glibc
#endif

/// The steps of setting up a kernel L2CAP socket for an LE credit-based channel, shared by the
/// BlueZ backend's connecting channels and its listeners.
///
/// The order matters to the kernel: bind with an LE address type first (it makes the socket an
/// LE one, which `BT_RCVMTU` requires), then set the options, then connect or listen. No
/// `BT_MODE` is set: LE sockets default to LE credit-based flow control, and the option exists
/// only when the kernel's `enable_ecred` is on.
package enum L2CAPSocket {
    /// `socket(AF_BLUETOOTH, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, BTPROTO_L2CAP)`.
    package static func open(_ operations: SocketOperations) throws(SocketError) -> CInt {
        let type = CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue)
        switch operations.socket(ABLE_AF_BLUETOOTH, type, ABLE_BTPROTO_L2CAP) {
        case .success(let socket):
            return socket
        case .failure(let errno) where errno == .addressFamilyNotSupported:
            throw SocketError(.notSupported, message: "this kernel has no Bluetooth sockets (\(errno))", errno: errno)
        case .failure(let errno):
            throw SocketError(errno, while: "creating an L2CAP socket")
        }
    }

    /// `bind(2)` to a local adapter (or any) and PSM (or none, or 0 for the kernel to pick one).
    ///
    /// - Parameter psmName: The PSM as users know it (`PSM 0x0080`), for the messages.
    package static func bind(
        _ socket: CInt, to address: L2CAPSocketAddress, psmName: String, _ operations: SocketOperations
    ) throws(SocketError) {
        let result = address.withUnsafeBytes { operations.bind(socket, $0) }
        switch result {
        case .success: return
        case .failure(let errno) where errno.rawValue == EADDRINUSE:
            throw SocketError(.alreadyInUse, message: "\(psmName) is already in use on this adapter", errno: errno)
        case .failure(let errno) where errno.rawValue == EACCES:
            throw SocketError(
                .notPermitted, message: "listening on SIG-assigned \(psmName) needs CAP_NET_BIND_SERVICE",
                errno: errno)
        case .failure(let errno):
            throw SocketError(errno, while: "binding the L2CAP socket to \(psmName)")
        }
    }

    /// `setsockopt(SOL_BLUETOOTH, BT_SECURITY)` with a `struct bt_security` (the key size left to the kernel).
    ///
    /// - Parameters:
    ///   - level: The kernel's `BT_SECURITY_*` level.
    ///   - levelName: The level as users know it (`medium`), for the message.
    package static func setSecurity(
        _ socket: CInt, level: UInt8, levelName: String, _ operations: SocketOperations
    ) throws(SocketError) {
        var security = bt_security(level: level, key_size: 0)
        let result = withUnsafeBytes(of: &security) {
            operations.setOption(socket, ABLE_SOL_BLUETOOTH, ABLE_BT_SECURITY, $0)
        }
        if case .failure(let errno) = result {
            throw SocketError(errno, while: "setting the L2CAP security level to \(levelName)")
        }
    }

    /// `getsockopt(SOL_BLUETOOTH, BT_SECURITY)`: the socket's security level now, which the
    /// kernel raises when a peer refuses a connection for want of security.
    package static func securityLevel(_ socket: CInt, _ operations: SocketOperations) -> UInt8? {
        guard
            case .success(let value) = operations.integerOption(
                socket, level: ABLE_SOL_BLUETOOTH, name: ABLE_BT_SECURITY, size: 2)
        else { return nil }
        // struct bt_security { u8 level; u8 key_size; }, little-endian in the integer.
        return UInt8(truncatingIfNeeded: value)
    }

    /// `setsockopt(SOL_BLUETOOTH, BT_RCVMTU)`: the largest SDU to accept (a `u16`).
    package static func setReceiveMTU(_ socket: CInt, _ mtu: Int, _ operations: SocketOperations) throws(SocketError) {
        guard (23...65_535).contains(mtu) else {
            throw SocketError(.invalidArgument, message: "an LE receive MTU must be 23 to 65,535 bytes, not \(mtu)")
        }
        let result = operations.setIntegerOption(
            socket, level: ABLE_SOL_BLUETOOTH, name: ABLE_BT_RCVMTU, size: 2, value: mtu)
        if case .failure(let errno) = result {
            throw SocketError(errno, while: "setting the L2CAP receive MTU to \(mtu)")
        }
    }

    /// `getsockopt(SOL_BLUETOOTH, BT_SNDMTU)` and `BT_RCVMTU` on a connected socket (`u16` each).
    package static func mtus(_ socket: CInt, _ operations: SocketOperations) throws(SocketError) -> (
        send: Int, receive: Int
    ) {
        func read(_ name: CInt, _ what: String) throws(SocketError) -> Int {
            switch operations.integerOption(socket, level: ABLE_SOL_BLUETOOTH, name: name, size: 2) {
            case .success(let value) where value > 0: return value
            case .success(let value):
                throw SocketError(.protocolViolation, message: "the kernel reported a \(what) MTU of \(value)")
            case .failure(let errno): throw SocketError(errno, while: "reading the L2CAP \(what) MTU")
            }
        }
        return (try read(ABLE_BT_SNDMTU, "send"), try read(ABLE_BT_RCVMTU, "receive"))
    }

    /// `getsockname(2)`: the address, with the PSM, the socket is bound to.
    package static func localAddress(_ socket: CInt, _ operations: SocketOperations) throws(SocketError)
        -> L2CAPSocketAddress
    {
        var storage = sockaddr_l2()
        let result = withUnsafeMutableBytes(of: &storage) { operations.localAddress(socket, $0) }
        switch result {
        case .success(let length):
            guard
                let address = withUnsafeBytes(
                    of: &storage,
                    {
                        L2CAPSocketAddress(bytes: UnsafeRawBufferPointer(rebasing: $0[..<min(length, $0.count)]))
                    })
            else {
                throw SocketError(.protocolViolation, message: "getsockname gave no L2CAP address")
            }
            return address
        case .failure(let errno):
            throw SocketError(errno, while: "reading the L2CAP socket's address")
        }
    }

    /// Closes a socket that is given up on, keeping the error that made us give up.
    package static func abandon(_ socket: CInt, _ operations: SocketOperations) {
        _ = operations.close(socket)
    }
}
