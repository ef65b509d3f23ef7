package import AbleIO

// The socket engine lives in AbleIO, below the public API, so it cannot throw BluetoothError: it
// throws SocketError (an errno, or a reason of its own, with a message), and the public types
// that reach it (L2CAPChannel, its streams, L2CAPListener, the acquired sockets) map what it
// throws here, so that users only ever see BluetoothError, with the errno kept as the cause.
extension BluetoothError {
    /// The public error for an error of the socket engine, keeping its message, where it was made,
    /// and its `errno` as the cause.
    ///
    /// - Parameter error: What the engine threw.
    package init(_ error: SocketError) {
        let code: Code
        switch error.reason {
        case .system(let errno): code = Self.code(for: errno)
        case .peerClosed: code = .disconnected
        case .closed: code = .notConnected
        case .timedOut: code = .timeout
        case .invalidArgument: code = .invalidArguments
        case .tooLong: code = .valueTooLong
        case .busy: code = .inProgress
        case .protocolViolation: code = .protocolError
        case .internalFailure: code = .internalError
        case .notSupported: code = .notSupported
        case .alreadyInUse: code = .alreadyExists
        case .notPermitted: code = .notPermitted
        case .connectionFailed: code = .connectionAttemptFailed
        }
        self.init(code, message: error.message, cause: error.errno, file: error.file, line: error.line)
    }

    /// The error for a socket call that failed with `errno`, classified by what the errno means.
    ///
    /// - Parameters:
    ///   - errno: What the call failed with.
    ///   - operation: What Able was doing, for the message, such as `sending on the L2CAP channel`.
    package init(_ errno: Errno, while operation: String, file: String = #fileID, line: Int = #line) {
        self.init(SocketError(errno, while: operation, file: file, line: line))
    }

    /// `error` as users see it: a ``BluetoothError`` for an error of the socket engine, any other
    /// error (a `BluetoothError` already, a `CancellationError`) as it is.
    package static func publishing(_ error: any Error) -> any Error {
        if let error = error as? SocketError { BluetoothError(error) } else { error }
    }

    private static func code(for errno: Errno) -> Code {
        switch errno.category {
        case .disconnection: .disconnected
        case .messageTooLong: .valueTooLong
        case .notPermitted: .notPermitted
        case .invalidArgument: .invalidArguments
        case .addressInUse: .alreadyExists
        case .notSupported: .notSupported
        case .notAvailable: .notAvailable
        case .badDescriptor: .internalError
        case .other: .failed
        }
    }
}
