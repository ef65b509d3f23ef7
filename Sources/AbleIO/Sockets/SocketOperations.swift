package import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// The socket calls the L2CAP code makes, as replaceable closures.
///
/// ``system`` calls the C library. Tests build variants that fail on cue, such as a `send` that
/// answers `EAGAIN` twice or a `receive` that reports `ECONNRESET`, so that the channel's error
/// paths run without a radio; the simulator runs the real ones over AF_UNIX socketpairs.
///
/// Each closure returns the call's value or the `errno` it failed with, and never retries:
/// `EINTR` and `EAGAIN` are the caller's business.
package struct SocketOperations: Sendable {
    /// `socket(2)`: a new socket of `domain`, `type` (flags such as `SOCK_NONBLOCK` included) and `protocol`.
    package var socket: @Sendable (_ domain: CInt, _ type: CInt, _ protocol: CInt) -> SyscallResult<CInt>

    /// `socketpair(2)`: two connected sockets.
    package var socketPair: @Sendable (_ domain: CInt, _ type: CInt, _ protocol: CInt) -> SyscallResult<(CInt, CInt)>

    /// `connect(2)` to the address whose bytes are given (a `sockaddr_l2` for L2CAP).
    package var connect: @Sendable (_ socket: CInt, _ address: UnsafeRawBufferPointer) -> SyscallResult<Void>

    /// `bind(2)` to the address whose bytes are given.
    package var bind: @Sendable (_ socket: CInt, _ address: UnsafeRawBufferPointer) -> SyscallResult<Void>

    /// `listen(2)` with a backlog.
    package var listen: @Sendable (_ socket: CInt, _ backlog: CInt) -> SyscallResult<Void>

    /// `accept(2)`: the new socket (close-on-exec), and the length of the peer's address written
    /// into `address`.
    package var accept:
        @Sendable (_ socket: CInt, _ address: UnsafeMutableRawBufferPointer) -> SyscallResult<(CInt, Int)>

    /// `send(2)`: the number of bytes the kernel took.
    package var send: @Sendable (_ socket: CInt, _ bytes: UnsafeRawBufferPointer, _ flags: CInt) -> SyscallResult<Int>

    /// `sendmmsg(2)`: sends each message as one packet, in order, until the socket would block or
    /// refuses one; the number of messages the kernel took (each one's `msg_len` set), at least
    /// one, or the `errno` of the first when it took none. `nil` makes senders use ``send`` for
    /// every packet.
    package var sendMessages: MessagesCall?

    /// `recvmmsg(2)` without a timeout: receives messages into the buffers the headers point to,
    /// in order, until the socket has no more (or `messages` is full); the number received (each
    /// one's `msg_len` set: with `MSG_TRUNC` in `flags`, its real length), at least one, or the
    /// `errno` of the first when there was none. An error met after the first is kept by the
    /// socket for the next call. `nil` makes receivers use ``receive`` for every packet.
    package var receiveMessages: MessagesCall?

    /// ``sendMessages`` and ``receiveMessages``.
    package typealias MessagesCall =
        @Sendable (_ socket: CInt, _ messages: UnsafeMutableBufferPointer<able_mmsghdr>, _ flags: CInt) ->
        SyscallResult<Int>

    /// `recv(2)`: the number of bytes received, or with `MSG_TRUNC` the packet's real length; `0` at
    /// the end of the connection.
    package var receive:
        @Sendable (_ socket: CInt, _ buffer: UnsafeMutableRawBufferPointer, _ flags: CInt) -> SyscallResult<Int>

    /// `getsockopt(2)` into `value`: the length the kernel wrote.
    package var getOption:
        @Sendable (_ socket: CInt, _ level: CInt, _ name: CInt, _ value: UnsafeMutableRawBufferPointer) ->
            SyscallResult<Int>

    /// `setsockopt(2)` from the bytes of `value`.
    package var setOption:
        @Sendable (_ socket: CInt, _ level: CInt, _ name: CInt, _ value: UnsafeRawBufferPointer) -> SyscallResult<Void>

    /// `getsockname(2)` into `address`: the length the kernel wrote.
    package var localAddress: @Sendable (_ socket: CInt, _ address: UnsafeMutableRawBufferPointer) -> SyscallResult<Int>

    /// `close(2)`.
    package var close: @Sendable (_ socket: CInt) -> SyscallResult<Void>

    /// `fcntl(2)` with an integer argument, such as `F_SETFL` with `O_NONBLOCK`.
    package var control: @Sendable (_ socket: CInt, _ command: CInt, _ argument: CInt) -> SyscallResult<CInt>

    /// The C library's calls.
    package static let system = SocketOperations(
        socket: { domain, type, proto in
            let fd = Glibc.socket(domain, type, proto)
            return fd >= 0 ? .success(fd) : .failure(.current)
        },
        socketPair: { domain, type, proto in
            var fds: [CInt] = [-1, -1]
            let result = Glibc.socketpair(domain, type, proto, &fds)
            return result == 0 ? .success((fds[0], fds[1])) : .failure(.current)
        },
        connect: { fd, address in
            let result = address.withMemoryRebound(to: sockaddr.self) {
                Glibc.connect(fd, $0.baseAddress, socklen_t(address.count))
            }
            return result == 0 ? .success(()) : .failure(.current)
        },
        bind: { fd, address in
            let result = address.withMemoryRebound(to: sockaddr.self) {
                Glibc.bind(fd, $0.baseAddress, socklen_t(address.count))
            }
            return result == 0 ? .success(()) : .failure(.current)
        },
        listen: { fd, backlog in
            Glibc.listen(fd, backlog) == 0 ? .success(()) : .failure(.current)
        },
        accept: { fd, address in
            var length = socklen_t(address.count)
            // accept4(2) is declared only under _GNU_SOURCE, which Swift's Glibc module is not built with.
            let accepted = address.withMemoryRebound(to: sockaddr.self) {
                Glibc.accept(fd, $0.baseAddress, &length)
            }
            guard accepted >= 0 else { return .failure(.current) }
            _ = Glibc.fcntl(accepted, F_SETFD, FD_CLOEXEC)
            return .success((accepted, Int(length)))
        },
        send: { fd, bytes, flags in
            let sent = able_send(fd, bytes.baseAddress, bytes.count, flags)
            return sent >= 0 ? .success(sent) : .failure(.current)
        },
        sendMessages: { fd, messages, flags in
            let sent = able_sendmmsg(fd, messages.baseAddress, UInt32(messages.count), flags)
            return sent >= 0 ? .success(Int(sent)) : .failure(.current)
        },
        receiveMessages: { fd, messages, flags in
            let received = able_recvmmsg(fd, messages.baseAddress, UInt32(messages.count), flags)
            return received >= 0 ? .success(Int(received)) : .failure(.current)
        },
        receive: { fd, buffer, flags in
            let received = able_recv(fd, buffer.baseAddress, buffer.count, flags)
            return received >= 0 ? .success(received) : .failure(.current)
        },
        getOption: { fd, level, name, value in
            var length = socklen_t(value.count)
            let result = Glibc.getsockopt(fd, level, name, value.baseAddress, &length)
            return result == 0 ? .success(Int(length)) : .failure(.current)
        },
        setOption: { fd, level, name, value in
            let result = Glibc.setsockopt(fd, level, name, value.baseAddress, socklen_t(value.count))
            return result == 0 ? .success(()) : .failure(.current)
        },
        localAddress: { fd, address in
            var length = socklen_t(address.count)
            let result = address.withMemoryRebound(to: sockaddr.self) {
                Glibc.getsockname(fd, $0.baseAddress, &length)
            }
            return result == 0 ? .success(Int(length)) : .failure(.current)
        },
        close: { fd in
            Glibc.close(fd) == 0 ? .success(()) : .failure(.current)
        },
        control: { fd, command, argument in
            let result = Glibc.fcntl(fd, command, argument)
            return result >= 0 ? .success(result) : .failure(.current)
        }
    )
}

extension SocketOperations {
    /// Calls `operation` again for as long as it fails with `EINTR`.
    @inline(__always)
    package static func retryingInterrupts<Value>(_ operation: () -> SyscallResult<Value>) -> SyscallResult<Value> {
        while true {
            let result = operation()
            if case .failure(let errno) = result, errno.isInterrupted { continue }
            return result
        }
    }

    /// Makes a socket nonblocking (`fcntl(F_SETFL, flags | O_NONBLOCK)`).
    package func setNonblocking(_ fd: CInt) -> SyscallResult<Void> {
        Self.retryingInterrupts { control(fd, F_GETFL, 0) }.flatMap { flags in
            flags & O_NONBLOCK != 0
                ? .success(()) : Self.retryingInterrupts { control(fd, F_SETFL, flags | O_NONBLOCK) }.map { _ in () }
        }
    }

    /// Reads an integer socket option of `size` bytes (2 for the kernel's `BT_SNDMTU` and
    /// `BT_RCVMTU`, which are `u16`; 4 for `int` options).
    package func integerOption(_ fd: CInt, level: CInt, name: CInt, size: Int) -> SyscallResult<Int> {
        var storage: UInt32 = 0
        return withUnsafeMutableBytes(of: &storage) { buffer in
            getOption(fd, level, name, UnsafeMutableRawBufferPointer(rebasing: buffer[..<size]))
        }.map { _ in
            size == 2 ? Int(UInt16(truncatingIfNeeded: storage)) : Int(Int32(bitPattern: storage))
        }
    }

    /// Sets an integer socket option of `size` bytes (2 or 4).
    package func setIntegerOption(_ fd: CInt, level: CInt, name: CInt, size: Int, value: Int) -> SyscallResult<Void> {
        if size == 2 {
            var value = UInt16(truncatingIfNeeded: value)
            return withUnsafeBytes(of: &value) { setOption(fd, level, name, $0) }
        }
        var value = Int32(truncatingIfNeeded: value)
        return withUnsafeBytes(of: &value) { setOption(fd, level, name, $0) }
    }
}
