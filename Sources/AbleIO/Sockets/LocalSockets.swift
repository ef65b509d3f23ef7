#if canImport(Glibc)
    import Glibc
#endif

/// AF_UNIX `SOCK_SEQPACKET` sockets that stand in for L2CAP ones: the simulator's channels and
/// acquired sockets, and the tests' and benchmarks' pairs, so that the same engine runs
/// everywhere.
package enum LocalSockets {
    /// Makes a nonblocking AF_UNIX `SOCK_SEQPACKET` socketpair that carries `mtu`-byte SDUs.
    ///
    /// AF_UNIX `SOCK_SEQPACKET` refuses (`EMSGSIZE`) a message longer than the sender's
    /// `SO_SNDBUF` less 32 bytes, and that buffer also bounds the bytes in flight (each message
    /// counts its kernel overhead too, several hundred bytes). So the pair sets `SO_SNDBUF` on
    /// both ends to `socketBufferSize`, which the kernel doubles and caps at twice
    /// `net.core.wmem_max` (212,992 on a default Debian kernel), and checks that an `mtu`-byte
    /// SDU fits.
    ///
    /// - Parameters:
    ///   - mtu: The largest SDU either end sends.
    ///   - socketBufferSize: The `SO_SNDBUF` to ask for.
    ///   - operations: The socket calls to make.
    /// - Returns: The two connected descriptors, which the caller owns.
    /// - Throws: ``SocketError`` if the socketpair cannot be made or cannot carry `mtu`-byte SDUs
    ///   (``SocketError/Reason/tooLong``).
    package static func seqpacketPair(
        mtu: Int,
        socketBufferSize: Int = 256 * 1024,
        operations: SocketOperations = .system
    ) throws(SocketError) -> (CInt, CInt) {
        let type = CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue)
        let pair: (CInt, CInt)
        switch operations.socketPair(AF_UNIX, type, 0) {
        case .success(let sockets): pair = sockets
        case .failure(let errno): throw SocketError(errno, while: "creating a socketpair")
        }
        do throws(SocketError) {
            for socket in [pair.0, pair.1] {
                if case .failure(let errno) = operations.setIntegerOption(
                    socket, level: SOL_SOCKET, name: SO_SNDBUF, size: 4, value: socketBufferSize)
                {
                    throw SocketError(errno, while: "setting SO_SNDBUF")
                }
                let granted: Int
                switch operations.integerOption(socket, level: SOL_SOCKET, name: SO_SNDBUF, size: 4) {
                case .success(let value): granted = value
                case .failure(let errno): throw SocketError(errno, while: "reading SO_SNDBUF")
                }
                guard mtu <= granted - 32 else {
                    throw SocketError(
                        .tooLong,
                        message:
                            "an AF_UNIX SOCK_SEQPACKET socket with SO_SNDBUF \(granted) cannot carry \(mtu)-byte SDUs"
                    )
                }
            }
        } catch {
            _ = operations.close(pair.0)
            _ = operations.close(pair.1)
            throw error
        }
        return pair
    }

    /// A nonblocking AF_UNIX `SOCK_SEQPACKET` socket that listens on an address the kernel picks
    /// in the abstract namespace, which nobody connects to: the listening socket of a listener
    /// whose channels are handed to it rather than accepted (the simulator's).
    ///
    /// - Returns: The descriptor, which the caller owns, and its identity.
    /// - Throws: ``SocketError`` when the socket cannot be made.
    package static func unconnectedListener() throws(SocketError) -> (CInt, DescriptorIdentity) {
        let type = CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue)
        let socket = Glibc.socket(AF_UNIX, type, 0)
        guard socket >= 0 else { throw SocketError(Errno.current, while: "creating a listening socket") }
        // Binding with the family alone autobinds to a fresh abstract address.
        var family = sa_family_t(AF_UNIX)
        let bound = withUnsafePointer(to: &family) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(socket, $0, socklen_t(MemoryLayout<sa_family_t>.size))
            }
        }
        guard bound == 0, Glibc.listen(socket, 1) == 0, let identity = DescriptorIdentity(socket) else {
            let error = SocketError(Errno.current, while: "listening on an AF_UNIX socket")
            Glibc.close(socket)
            throw error
        }
        return (socket, identity)
    }
}
