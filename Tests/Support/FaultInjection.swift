package import AbleIO
import CLinux
import Foundation

/// Socket calls that fail on cue and otherwise call the real ones: queue up faults for `send`
/// and `receive`, and each call takes the next one.
package final class FaultInjection: Sendable {
    package enum Fault: Sendable, CustomStringConvertible {
        /// Fail with this errno, doing nothing.
        case error(CInt)
        /// Send only the first `n` bytes of the SDU (a real, truncated send) and report `n`.
        case short(Int)

        package var description: String {
            switch self {
            case .error(let errno): "\(Errno(errno))"
            case .short(let count): "short write of \(count) bytes"
            }
        }
    }

    private struct State {
        package var sendFaults: [Fault] = []
        package var receiveFaults: [Fault] = []
        package var sendMessagesFaults: [Fault] = []
        package var sendCalls = 0
        package var sendMessagesCalls = 0
        package var receiveCalls = 0
        package var receiveMessagesCalls = 0
    }

    private let state = Lock(State())

    /// Socket calls with no fault queued yet.
    package init() {}

    /// Makes the next `send` calls fail, in order.
    package func failSends(_ faults: Fault...) {
        state.withLock { $0.sendFaults += faults }
    }

    /// Makes the next `sendMessages` calls (`sendmmsg`, several queued packets at once) fail, in
    /// order; `.short(n)` truncates the call's first packet to `n` bytes.
    package func failSendMessages(_ faults: Fault...) {
        state.withLock { $0.sendMessagesFaults += faults }
    }

    /// Makes the next `receive` calls fail, in order.
    package func failReceives(_ faults: Fault...) {
        state.withLock { $0.receiveFaults += faults }
    }

    /// How many times `send` was called.
    package var sendCalls: Int { state.withLock { $0.sendCalls } }

    /// How many times `sendMessages` was called.
    package var sendMessagesCalls: Int { state.withLock { $0.sendMessagesCalls } }

    /// How many times `receive` was called.
    package var receiveCalls: Int { state.withLock { $0.receiveCalls } }

    /// How many of those were `receiveMessages` (`recvmmsg`) calls.
    package var receiveMessagesCalls: Int { state.withLock { $0.receiveMessagesCalls } }

    /// Faults still queued.
    package var pendingFaults: Int {
        state.withLock { $0.sendFaults.count + $0.sendMessagesFaults.count + $0.receiveFaults.count }
    }

    /// The real calls with the faults in front of `send`, `sendMessages`, `receive` and
    /// `receiveMessages`.
    package var operations: SocketOperations {
        var operations = SocketOperations.system
        operations.send = { socket, bytes, flags in
            let fault = self.state.withLock { state -> Fault? in
                state.sendCalls += 1
                return state.sendFaults.isEmpty ? nil : state.sendFaults.removeFirst()
            }
            switch fault {
            case nil:
                return SocketOperations.system.send(socket, bytes, flags)
            case .error(let errno):
                return .failure(Errno(errno))
            case .short(let count):
                return SocketOperations.system.send(socket, UnsafeRawBufferPointer(rebasing: bytes[..<count]), flags)
            }
        }
        operations.sendMessages = { socket, messages, flags in
            let fault = self.state.withLock { state -> Fault? in
                state.sendMessagesCalls += 1
                return state.sendMessagesFaults.isEmpty ? nil : state.sendMessagesFaults.removeFirst()
            }
            switch fault {
            case nil:
                return SocketOperations.system.sendMessages!(socket, messages, flags)
            case .error(let errno):
                return .failure(Errno(errno))
            case .short(let count):
                // The kernel never does this to a SOCK_SEQPACKET socket; the channel must notice.
                let result = SocketOperations.system.sendMessages!(
                    socket, UnsafeMutableBufferPointer(rebasing: messages[..<1]), flags)
                if case .success = result { messages[0].msg_len = UInt32(count) }
                return result
            }
        }
        // A receive fault applies to whichever call receives next: `recv`, or `recvmmsg` for
        // channels whose MTU lets several SDUs be received at once.
        operations.receiveMessages = { socket, messages, flags in
            let fault = self.state.withLock { state -> Fault? in
                state.receiveCalls += 1
                state.receiveMessagesCalls += 1
                return state.receiveFaults.isEmpty ? nil : state.receiveFaults.removeFirst()
            }
            switch fault {
            case nil, .short:
                return SocketOperations.system.receiveMessages!(socket, messages, flags)
            case .error(let errno):
                return .failure(Errno(errno))
            }
        }
        operations.receive = { socket, buffer, flags in
            let fault = self.state.withLock { state -> Fault? in
                state.receiveCalls += 1
                return state.receiveFaults.isEmpty ? nil : state.receiveFaults.removeFirst()
            }
            switch fault {
            case nil, .short:
                return SocketOperations.system.receive(socket, buffer, flags)
            case .error(let errno):
                return .failure(Errno(errno))
            }
        }
        return operations
    }
}
