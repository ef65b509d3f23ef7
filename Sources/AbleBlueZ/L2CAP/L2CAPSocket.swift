import AbleCore
import AbleIO
import CBluetooth

#if canImport(Glibc)
    import Glibc
#endif

/// The steps of setting up a kernel L2CAP socket for an LE credit-based channel, shared by
/// ``L2CAPChannel`` (connecting) and ``L2CAPListener`` (listening, accepting).
///
/// The order matters to the kernel: bind with an LE address type first (it makes the socket an
/// LE one, which `BT_RCVMTU` requires), then set the options, then connect or listen. No
/// `BT_MODE` is set: LE sockets default to LE credit-based flow control, and the option exists
/// only when the kernel's `enable_ecred` is on.
enum L2CAPSocket {
    /// `socket(AF_BLUETOOTH, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, BTPROTO_L2CAP)`.
    static func open(_ operations: SocketOperations) throws -> CInt {
        let type = CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue)
        switch operations.socket(ABLE_AF_BLUETOOTH, type, ABLE_BTPROTO_L2CAP) {
        case .success(let socket):
            return socket
        case .failure(let errno) where errno == .addressFamilyNotSupported:
            throw BluetoothError(
                .notSupported, message: "this kernel has no Bluetooth sockets (\(errno))", cause: errno)
        case .failure(let errno):
            throw BluetoothError(errno, while: "creating an L2CAP socket")
        }
    }

    /// `bind(2)` to a local adapter (or any) and PSM (or none, or ``PSM/automatic``).
    static func bind(_ socket: CInt, to address: L2CAPSocketAddress, _ operations: SocketOperations) throws {
        let result = address.withUnsafeBytes { operations.bind(socket, $0) }
        switch result {
        case .success: return
        case .failure(let errno) where errno.rawValue == EADDRINUSE:
            throw BluetoothError(
                .alreadyExists, message: "\(address.psm) is already in use on this adapter", cause: errno)
        case .failure(let errno) where errno.rawValue == EACCES:
            throw BluetoothError(
                .notPermitted,
                message: "listening on SIG-assigned \(address.psm) needs CAP_NET_BIND_SERVICE", cause: errno)
        case .failure(let errno):
            throw BluetoothError(errno, while: "binding the L2CAP socket to \(address.psm)")
        }
    }

    /// `setsockopt(SOL_BLUETOOTH, BT_SECURITY)` with a `struct bt_security` (the key size left to the kernel).
    static func setSecurity(_ socket: CInt, _ level: L2CAPChannel.SecurityLevel, _ operations: SocketOperations)
        throws
    {
        var security = bt_security(level: level.rawValue, key_size: 0)
        let result = withUnsafeBytes(of: &security) {
            operations.setOption(socket, ABLE_SOL_BLUETOOTH, ABLE_BT_SECURITY, $0)
        }
        if case .failure(let errno) = result {
            throw BluetoothError(errno, while: "setting the L2CAP security level to \(level)")
        }
    }

    /// `setsockopt(SOL_BLUETOOTH, BT_RCVMTU)`: the largest SDU to accept (a `u16`).
    static func setReceiveMTU(_ socket: CInt, _ mtu: Int, _ operations: SocketOperations) throws {
        guard (23...65_535).contains(mtu) else {
            throw BluetoothError(
                .invalidArguments, message: "an LE receive MTU must be 23 to 65,535 bytes, not \(mtu)")
        }
        let result = operations.setIntegerOption(
            socket, level: ABLE_SOL_BLUETOOTH, name: ABLE_BT_RCVMTU, size: 2, value: mtu)
        if case .failure(let errno) = result {
            throw BluetoothError(errno, while: "setting the L2CAP receive MTU to \(mtu)")
        }
    }

    /// `getsockopt(SOL_BLUETOOTH, BT_SNDMTU)` and `BT_RCVMTU` on a connected socket (`u16` each).
    static func mtus(_ socket: CInt, _ operations: SocketOperations) throws -> (send: Int, receive: Int) {
        func read(_ name: CInt, _ what: String) throws -> Int {
            switch operations.integerOption(socket, level: ABLE_SOL_BLUETOOTH, name: name, size: 2) {
            case .success(let value) where value > 0: return value
            case .success(let value):
                throw BluetoothError(.protocolError, message: "the kernel reported a \(what) MTU of \(value)")
            case .failure(let errno): throw BluetoothError(errno, while: "reading the L2CAP \(what) MTU")
            }
        }
        return (try read(ABLE_BT_SNDMTU, "send"), try read(ABLE_BT_RCVMTU, "receive"))
    }

    /// `getsockname(2)`: the address, with the PSM, the socket is bound to.
    static func localAddress(_ socket: CInt, _ operations: SocketOperations) throws -> L2CAPSocketAddress {
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
                throw BluetoothError(.protocolError, message: "getsockname gave no L2CAP address")
            }
            return address
        case .failure(let errno):
            throw BluetoothError(errno, while: "reading the L2CAP socket's address")
        }
    }

    /// Closes a socket that is given up on, keeping the error that made us give up.
    static func abandon(_ socket: CInt, _ operations: SocketOperations) {
        _ = operations.close(socket)
    }
}
