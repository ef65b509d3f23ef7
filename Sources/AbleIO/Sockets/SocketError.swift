/// Why an operation of the socket engine failed: a system call's `errno`, or one of the engine's
/// own reasons.
///
/// AbleIO sits below the public API, so it throws this instead of `BluetoothError`: the API
/// layer (AbleCore's `BluetoothError.init(_: SocketError)`) maps each reason to a public code,
/// keeps the message and where the error was made, and keeps the `errno` as the cause. Every
/// public entry point that reaches the engine maps what it throws, so users only ever see
/// `BluetoothError`.
package struct SocketError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    package enum Reason: Sendable, Equatable {
        /// A system call failed with this `errno`.
        case system(Errno)
        /// The peer closed the connection.
        case peerClosed
        /// This side closed the socket.
        case closed
        /// The operation took longer than its deadline.
        case timedOut
        /// An argument the engine cannot use, such as an empty SDU.
        case invalidArgument
        /// A packet longer than the socket's MTU.
        case tooLong
        /// Another task is already doing what was asked, such as waiting for the next element.
        case busy
        /// The peer or the kernel broke the protocol, such as an SDU over the receive MTU.
        case protocolViolation
        /// The engine's own state cannot go on, such as a datagram socket that took part of an SDU.
        case internalFailure
        /// The kernel lacks what was asked for, such as Bluetooth sockets.
        case notSupported
        /// The address or PSM is taken.
        case alreadyInUse
        /// The caller lacks the privilege or the security, such as for a SIG-assigned PSM.
        case notPermitted
        /// The peer refused the connection or did not answer.
        case connectionFailed
    }

    /// What went wrong.
    package var reason: Reason
    /// What happened, for people.
    package var message: String
    /// The file that made the error, as `#fileID` names it.
    package var file: String
    /// The line in the file.
    package var line: Int
    /// The `errno` behind an error of the engine's own reason, if one is.
    private var underlyingErrno: Errno?

    /// An error of the engine's own.
    ///
    /// - Parameters:
    ///   - reason: What went wrong.
    ///   - message: What happened, for people.
    ///   - errno: The `errno` behind it, if a call failed.
    package init(_ reason: Reason, message: String, errno: Errno? = nil, file: String = #fileID, line: Int = #line) {
        self.reason = reason
        self.message = message
        self.underlyingErrno = errno
        self.file = file
        self.line = line
    }

    /// The error for a system call that failed with `errno`.
    ///
    /// - Parameters:
    ///   - errno: What the call failed with.
    ///   - operation: What the engine was doing, for the message, such as `sending on the L2CAP
    ///     channel`.
    package init(_ errno: Errno, while operation: String, file: String = #fileID, line: Int = #line) {
        self.init(.system(errno), message: "\(operation) failed: \(errno)", file: file, line: line)
    }

    /// The `errno` behind the error, if a system call failed.
    package var errno: Errno? {
        if case .system(let errno) = reason { errno } else { underlyingErrno }
    }

    package var description: String { message }
}
