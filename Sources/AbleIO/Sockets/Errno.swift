#if canImport(Glibc)
    import Glibc
#endif

/// A C `errno` value that a socket call failed with.
///
/// It is the reason of the ``SocketError``s the socket code throws, and the public API keeps it as
/// the `cause` of the `BluetoothError` it maps them to, so that the kernel's own reason
/// (`ECONNRESET`, `EACCES`, …) stays visible.
package struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    /// The `errno` value.
    package var rawValue: CInt

    /// Wraps an `errno` value.
    ///
    /// - Parameter rawValue: The value, such as `EAGAIN`.
    package init(_ rawValue: CInt) {
        self.rawValue = rawValue
    }

    /// The value of `errno` now, right after a call failed.
    package static var current: Errno { Errno(errno) }

    /// `EINPROGRESS`: a nonblocking `connect(2)` has started.
    package static let inProgress = Errno(EINPROGRESS)
    /// `ECONNRESET`: the peer or the link reset the connection.
    package static let connectionReset = Errno(ECONNRESET)
    /// `EMSGSIZE`: the packet does not fit the socket's limit.
    package static let messageTooLong = Errno(EMSGSIZE)
    /// `EAFNOSUPPORT`: the kernel has no such address family (no Bluetooth here).
    package static let addressFamilyNotSupported = Errno(EAFNOSUPPORT)
    /// `ECONNREFUSED`: the peer refused the connection (nothing listens there).
    package static let connectionRefused = Errno(ECONNREFUSED)
    /// `ECONNABORTED`: this side's stack ended the connection.
    package static let connectionAborted = Errno(ECONNABORTED)
    /// `EACCES`: the peer or the kernel demands more (security, privilege).
    package static let permissionDenied = Errno(EACCES)
    /// `EPERM`: the operation is not permitted.
    package static let operationNotPermitted = Errno(EPERM)
    /// `ETIMEDOUT`: the peer did not answer in time.
    package static let timedOut = Errno(ETIMEDOUT)
    /// `EHOSTDOWN`: the peer is down.
    package static let hostDown = Errno(EHOSTDOWN)
    /// `EHOSTUNREACH`: the peer cannot be reached.
    package static let hostUnreachable = Errno(EHOSTUNREACH)

    /// Whether the call should be retried at once (`EINTR`).
    package var isInterrupted: Bool { rawValue == EINTR }

    /// Whether the socket cannot proceed now and will say when it can (`EAGAIN`, `EWOULDBLOCK`).
    package var isWouldBlock: Bool { rawValue == EAGAIN || rawValue == EWOULDBLOCK }

    /// Whether the error says the connection is gone: reset by the peer, dropped with the link,
    /// or shut down.
    ///
    /// The kernel's L2CAP code ends a channel whose peer sent a Disconnection Request like a
    /// closed socket (`recv(2)` returns 0) and reports a lost link as the HCI reason's errno
    /// (`ECONNRESET` when the peer ended the link, `ECONNABORTED` when this side did, `ETIMEDOUT`
    /// for a supervision timeout); an AF_UNIX peer that closes gives `EPIPE` to senders.
    package var isDisconnection: Bool {
        switch rawValue {
        case ECONNRESET, EPIPE, ENOTCONN, ECONNABORTED, ETIMEDOUT, EHOSTDOWN, EHOSTUNREACH, ESHUTDOWN, ENETDOWN,
            ENETRESET:
            true
        default:
            false
        }
    }

    /// The symbolic name and the C library's text, such as `ECONNRESET (Connection reset by peer)`.
    package var description: String {
        let text = String(cString: strerror(rawValue))
        return Self.names[rawValue].map { "\($0) (\(text))" } ?? "errno \(rawValue) (\(text))"
    }

    private static let names: [CInt: String] = [
        EAGAIN: "EAGAIN", EINTR: "EINTR", EINPROGRESS: "EINPROGRESS", ECONNRESET: "ECONNRESET", EPIPE: "EPIPE",
        ENOTCONN: "ENOTCONN", ECONNABORTED: "ECONNABORTED", ETIMEDOUT: "ETIMEDOUT", EHOSTDOWN: "EHOSTDOWN",
        EHOSTUNREACH: "EHOSTUNREACH", ESHUTDOWN: "ESHUTDOWN", ENETDOWN: "ENETDOWN", ENETRESET: "ENETRESET",
        ECONNREFUSED: "ECONNREFUSED", EACCES: "EACCES", EPERM: "EPERM", EADDRINUSE: "EADDRINUSE",
        EMSGSIZE: "EMSGSIZE", EINVAL: "EINVAL", EBADF: "EBADF", ENOBUFS: "ENOBUFS", ENOMEM: "ENOMEM",
        EAFNOSUPPORT: "EAFNOSUPPORT", EPROTONOSUPPORT: "EPROTONOSUPPORT", EOPNOTSUPP: "EOPNOTSUPP",
        ENOPROTOOPT: "ENOPROTOOPT", EALREADY: "EALREADY", EISCONN: "EISCONN", ENODEV: "ENODEV",
        EADDRNOTAVAIL: "EADDRNOTAVAIL", EMFILE: "EMFILE", ENFILE: "ENFILE",
    ]
}

/// The outcome of one system call: its value, or the `errno` it failed with.
package typealias SyscallResult<Value> = Result<Value, Errno>

extension Errno {
    /// What an `errno` means for the caller, so that a layer that cannot see the C constants (the
    /// public API maps these to `BluetoothError` codes) can tell the errors apart.
    package enum Category: Sendable {
        /// The connection is gone; see ``Errno/isDisconnection``.
        case disconnection
        /// `EMSGSIZE`.
        case messageTooLong
        /// `EACCES`, `EPERM`.
        case notPermitted
        /// `EINVAL`.
        case invalidArgument
        /// `EADDRINUSE`.
        case addressInUse
        /// `EAFNOSUPPORT`, `EPROTONOSUPPORT`, `EOPNOTSUPP`, `ENOPROTOOPT`.
        case notSupported
        /// `ENODEV`, `EADDRNOTAVAIL`.
        case notAvailable
        /// `EBADF`: a descriptor Able should not have used.
        case badDescriptor
        /// Anything else.
        case other
    }

    /// What the `errno` means, for the caller.
    package var category: Category {
        switch rawValue {
        case _ where isDisconnection: .disconnection
        case EMSGSIZE: .messageTooLong
        case EACCES, EPERM: .notPermitted
        case EINVAL: .invalidArgument
        case EADDRINUSE: .addressInUse
        case EAFNOSUPPORT, EPROTONOSUPPORT, EOPNOTSUPP, ENOPROTOOPT: .notSupported
        case ENODEV, EADDRNOTAVAIL: .notAvailable
        case EBADF: .badDescriptor
        default: .other
        }
    }
}
