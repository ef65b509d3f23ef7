#if canImport(Glibc)
    import Glibc
#endif

/// The receiving side of a channel's socket: `recv(2)` of one SDU at a time into a buffer of the
/// receive MTU, then copied into an array of its size; or, while SDUs come large (half the MTU
/// or more), straight into an array of the MTU's capacity, which becomes the element.
///
/// The kernel reports a reset once (`sock_error` clears it) and then still hands out the SDUs
/// queued before it, then the end; the receiver holds the error back until those are out. Once
/// it has seen the end, it reports the same end on every later call.
///
/// Thread safety: used by one party at a time, the socket's read handler or a consumer that
/// receives for itself, as the channel's ``WatermarkBuffer`` arranges (its lock orders the
/// turns); hence `@unchecked Sendable`.
final class PacketReceiver: @unchecked Sendable {
    enum Outcome {
        case packet([UInt8])
        case wouldBlock
        /// The end: normal (`nil`), or an error.
        case end(BluetoothError?)
    }

    let socket: CInt
    let operations: SocketOperations
    let receiveMTU: Int

    private let scratch: UnsafeMutableRawBufferPointer
    private var deferredError: BluetoothError?
    private var end: BluetoothError??

    /// Whether the last SDU filled at least half the receive MTU: then the next one is received
    /// straight into its own array, sparing a copy of a large SDU.
    private var expectsLargeSDU = false

    /// Receive MTUs up to this size always go through the scratch buffer: copying is cheap there.
    private static let directReceiveThreshold = 4096

    /// Runs the socket's read handler on the loop: for an end this receiver met that the socket
    /// may not report (an SDU over the MTU, an error the kernel reported once), so that the
    /// handler meets it too and tears the channel down.
    let kickReader = LateCall()

    init(socket: CInt, operations: SocketOperations, receiveMTU: Int) {
        self.socket = socket
        self.operations = operations
        self.receiveMTU = receiveMTU
        scratch = .allocate(byteCount: max(receiveMTU, 1), alignment: 16)
        LargeSDUMemory.prepare(receiveMTU: receiveMTU)
    }

    deinit {
        scratch.deallocate()
    }

    /// Receives one SDU, if one is there.
    func receive() -> Outcome {
        if let end { return .end(end) }
        while true {
            let result: SyscallResult<Int>
            var direct: [UInt8]?
            if expectsLargeSDU {
                var received = SyscallResult<Int>.success(0)
                direct = [UInt8](unsafeUninitializedCapacity: receiveMTU) { buffer, count in
                    received = operations.receive(socket, UnsafeMutableRawBufferPointer(buffer), CInt(MSG_TRUNC))
                    if case .success(let length) = received { count = min(length, receiveMTU) }
                }
                result = received
            } else {
                result = operations.receive(socket, scratch, CInt(MSG_TRUNC))
            }
            switch result {
            case .success(0):
                // The end of the connection. (An empty SDU would read the same, which is why
                // `send` refuses to send one.)
                return ended(deferredError)
            case .success(let length) where length > receiveMTU:
                return ended(
                    BluetoothError(
                        .protocolError,
                        message: "received an SDU of \(length) bytes, over the receive MTU of \(receiveMTU)"))
            case .success(let length):
                let large = receiveMTU > Self.directReceiveThreshold && length >= receiveMTU / 2
                defer { expectsLargeSDU = large }
                guard let direct else {
                    return .packet(Self.copy(UnsafeRawBufferPointer(rebasing: scratch[..<length])))
                }
                // Keep the array the SDU arrived in only if the SDU fills half of it or more.
                return .packet(large ? direct : direct.withUnsafeBytes { Self.copy($0) })
            case .failure(let errno) where errno.isInterrupted:
                continue
            case .failure(let errno) where errno.isWouldBlock:
                if let deferredError { return ended(deferredError) }
                return .wouldBlock
            case .failure(let errno) where errno.isDisconnection && deferredError == nil:
                deferredError = BluetoothError(errno, while: "receiving on the L2CAP channel")
            case .failure(let errno):
                return ended(deferredError ?? BluetoothError(errno, while: "receiving on the L2CAP channel"))
            }
        }
    }

    /// For a consumer that found no SDU buffered: the next one if it is there, else `nil`. An
    /// end met here is left to the socket's read handler, which ``kickReader`` runs.
    func receiveForConsumer() -> [UInt8]? {
        switch receive() {
        case .packet(let packet):
            return packet
        case .wouldBlock:
            return nil
        case .end:
            kickReader()
            return nil
        }
    }

    /// An array of exactly these bytes.
    private static func copy(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bytes.count) { buffer, count in
            if let source = bytes.baseAddress, bytes.count > 0 {
                buffer.baseAddress!.initialize(from: source.assumingMemoryBound(to: UInt8.self), count: bytes.count)
            }
            count = bytes.count
        }
    }

    private func ended(_ error: BluetoothError?) -> Outcome {
        end = .some(error)
        return .end(error)
    }
}
