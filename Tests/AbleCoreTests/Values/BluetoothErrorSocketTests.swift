import AbleCore
import AbleIO
import Testing

/// The socket engine (AbleIO) throws `SocketError`; the public API maps it to `BluetoothError`.
struct BluetoothErrorSocketTests {
    @Test(
        "Each reason of the socket engine maps to its public code, keeping the message and where it was made",
        arguments: [
            (SocketError.Reason.peerClosed, BluetoothError.Code.disconnected), (.closed, .notConnected),
            (.timedOut, .timeout), (.invalidArgument, .invalidArguments), (.tooLong, .valueTooLong),
            (.busy, .inProgress), (.protocolViolation, .protocolError), (.internalFailure, .internalError),
        ] as [(SocketError.Reason, BluetoothError.Code)]
    )
    func reasonsMapToCodes(reason: SocketError.Reason, code: BluetoothError.Code) {
        let socketError = SocketError(reason, message: "what happened")
        let error = BluetoothError(socketError)
        #expect(error.code == code)
        #expect(error.message == "what happened")
        #expect(error.location.file == socketError.file)
        #expect(error.location.line == socketError.line)
        #expect(error.cause == nil)
    }

    @Test(
        "A failed call keeps its errno as the cause, classified by what it means",
        arguments: [
            (Errno.connectionReset, BluetoothError.Code.disconnected), (.messageTooLong, .valueTooLong),
            (.addressFamilyNotSupported, .notSupported), (.inProgress, .failed),
        ] as [(Errno, BluetoothError.Code)]
    )
    func errnosMapToCodes(errno: Errno, code: BluetoothError.Code) {
        let error = BluetoothError(SocketError(errno, while: "sending on the L2CAP channel"))
        #expect(error.code == code)
        #expect(error.cause as? Errno == errno)
        #expect(error.message.hasPrefix("sending on the L2CAP channel failed: "))
    }

    @Test("Errors that are not the engine's pass through unchanged")
    func otherErrorsPassThrough() {
        #expect(BluetoothError.publishing(CancellationError()) is CancellationError)
        let own = BluetoothError(.rejected, message: "no")
        #expect((BluetoothError.publishing(own) as? BluetoothError)?.code == .rejected)
        #expect(
            (BluetoothError.publishing(SocketError(.closed, message: "closed")) as? BluetoothError)?.code
                == .notConnected)
    }
}
