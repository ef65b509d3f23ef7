import Able
import AbleIO
import CBluetooth
import Foundation

@testable import AbleBlueZ

/// Socket calls that stand in for the kernel's L2CAP sockets, on a machine without Bluetooth:
/// an "L2CAP socket" is an AF_UNIX `SOCK_SEQPACKET` socket, `connect` and the L2CAP options are
/// recorded and answered as configured, and `bind`/`listen`/`accept` work on an abstract AF_UNIX
/// address. The rest of the calls are real.
final class FakeL2CAPKernel: Sendable {
    struct Option: Equatable, Sendable {
        var level: CInt
        var name: CInt
        var value: [UInt8]
    }

    struct Configuration: Sendable {
        /// What `connect` returns: `EINPROGRESS` (completes when the socket is writable), `0`, or an error.
        var connectResult: CInt = EINPROGRESS
        /// What `SO_ERROR` reports once the connecting socket is writable.
        var connectionError: CInt = 0
        /// Fill the connecting socket's buffer so that it never becomes writable.
        var neverWritable = false
        /// The `BT_SECURITY` level the socket reports after a failed connection: the kernel
        /// raises it when the peer refuses for want of security.
        var securityAfterFailure: UInt8 = 1
        var sendMTU: UInt16 = 251
        var receiveMTU: UInt16 = 512
        /// The PSM `getsockname` reports for a listener bound to PSM 0.
        var assignedPSM: UInt16 = 0x0080
        /// The address `accept` reports for each peer.
        var peer = L2CAPSocketAddress(
            address: "11:22:33:44:55:66", addressType: UInt8(ABLE_BDADDR_LE_RANDOM), psm: PSM(rawValue: 0x0080))
    }

    private struct State {
        var configuration: Configuration
        var boundAddresses: [L2CAPSocketAddress] = []
        var connectedAddresses: [L2CAPSocketAddress] = []
        var options: [Option] = []
        var remoteEnds: [CInt] = []
        var openSockets: Set<CInt> = []
        var listening: CInt?
    }

    private let state: Lock<State>
    /// The abstract AF_UNIX address that stands in for the listening PSM.
    let listenPath = "able-l2cap-test-\(UUID().uuidString)"

    init(_ configuration: Configuration = Configuration()) {
        state = Lock(State(configuration: configuration))
    }

    deinit {
        for socket in state.withLock({ $0.remoteEnds }) { close(socket) }
    }

    var boundAddresses: [L2CAPSocketAddress] { state.withLock { $0.boundAddresses } }
    var connectedAddresses: [L2CAPSocketAddress] { state.withLock { $0.connectedAddresses } }
    var options: [Option] { state.withLock { $0.options } }
    /// The other ends of the sockets handed out for connecting: the "peers".
    var remoteEnds: [CInt] { state.withLock { $0.remoteEnds } }
    /// Sockets handed out and not closed yet.
    var openSockets: Set<CInt> { state.withLock { $0.openSockets } }

    var operations: SocketOperations {
        var operations = SocketOperations.system
        operations.socket = { domain, type, _ in
            precondition(domain == ABLE_AF_BLUETOOTH)
            let (local, remote): (CInt, CInt)
            do {
                (local, remote) = try L2CAPChannel.makeSocketPair(mtu: 4096, socketBufferSize: 8192)
            } catch {
                return .failure(Errno(EMFILE))
            }
            let fill = self.state.withLock { state in
                state.remoteEnds.append(remote)
                state.openSockets.insert(local)
                return state.configuration.neverWritable
            }
            if fill {
                let chunk = [UInt8](repeating: 0, count: 1024)
                while chunk.withUnsafeBytes({ send(local, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT)) }) > 0 {}
            }
            return .success(local)
        }
        operations.bind = { socket, bytes in
            guard let address = L2CAPSocketAddress(bytes: bytes) else { return .failure(Errno(EINVAL)) }
            self.state.withLock { $0.boundAddresses.append(address) }
            return .success(())
        }
        operations.listen = { socket, backlog in
            // Trade the socketpair end for a listening AF_UNIX socket on the abstract address.
            let listener = Glibc.socket(AF_UNIX, CInt(SOCK_SEQPACKET.rawValue) | CInt(SOCK_NONBLOCK.rawValue), 0)
            guard listener >= 0, dup2(listener, socket) >= 0 else { return .failure(.current) }
            close(listener)
            let bound = self.withAbstractAddress { Glibc.bind(socket, $0, $1) }
            guard bound == 0 else { return .failure(.current) }
            self.state.withLock { $0.listening = socket }
            return Glibc.listen(socket, backlog) == 0 ? .success(()) : .failure(.current)
        }
        operations.localAddress = { socket, buffer in
            let address = self.state.withLock { state in
                var address = state.boundAddresses.last!
                if address.psm == .automatic { address.psm = PSM(rawValue: state.configuration.assignedPSM) }
                return address
            }
            return address.withUnsafeBytes { bytes in
                buffer.copyMemory(from: bytes)
                return .success(bytes.count)
            }
        }
        operations.accept = { socket, buffer in
            switch SocketOperations.system.accept(socket, buffer) {
            case .success(let (accepted, _)):
                let peer = self.state.withLock { state in
                    state.openSockets.insert(accepted)
                    return state.configuration.peer
                }
                return peer.withUnsafeBytes { bytes in
                    buffer.copyMemory(from: bytes)
                    return .success((accepted, bytes.count))
                }
            case .failure(let errno):
                return .failure(errno)
            }
        }
        operations.connect = { socket, bytes in
            guard let address = L2CAPSocketAddress(bytes: bytes) else { return .failure(Errno(EINVAL)) }
            let result = self.state.withLock { state in
                state.connectedAddresses.append(address)
                return state.configuration.connectResult
            }
            return result == 0 ? .success(()) : .failure(Errno(result))
        }
        operations.setOption = { socket, level, name, value in
            if level == ABLE_SOL_BLUETOOTH {
                self.state.withLock { $0.options.append(Option(level: level, name: name, value: Array(value))) }
                return .success(())
            }
            return SocketOperations.system.setOption(socket, level, name, value)
        }
        operations.getOption = { socket, level, name, value in
            let configuration = self.state.withLock { $0.configuration }
            var answer: [UInt8]
            switch (level, name) {
            case (SOL_SOCKET, SO_ERROR):
                answer = withUnsafeBytes(of: configuration.connectionError) { Array($0) }
            case (ABLE_SOL_BLUETOOTH, ABLE_BT_SECURITY):
                answer = [configuration.securityAfterFailure, 0]
            case (ABLE_SOL_BLUETOOTH, ABLE_BT_SNDMTU):
                answer = withUnsafeBytes(of: configuration.sendMTU) { Array($0) }
            case (ABLE_SOL_BLUETOOTH, ABLE_BT_RCVMTU):
                answer = withUnsafeBytes(of: configuration.receiveMTU) { Array($0) }
            default:
                return SocketOperations.system.getOption(socket, level, name, value)
            }
            answer = Array(answer.prefix(value.count))
            value.copyBytes(from: answer)
            return .success(answer.count)
        }
        operations.close = { socket in
            self.state.withLock { _ = $0.openSockets.remove(socket) }
            return SocketOperations.system.close(socket)
        }
        return operations
    }

    /// A client that connects to the listener, as a peer's L2CAP socket would.
    func connectClient() throws -> CInt {
        let client = Glibc.socket(AF_UNIX, CInt(SOCK_SEQPACKET.rawValue), 0)
        guard client >= 0 else { throw Errno.current }
        guard withAbstractAddress({ Glibc.connect(client, $0, $1) }) == 0 else {
            let error = Errno.current
            close(client)
            throw error
        }
        return client
    }

    private func withAbstractAddress<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(listenPath.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            bytes[0] = 0  // abstract namespace
            for (index, byte) in path.enumerated() { bytes[index + 1] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + path.count)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}

/// Blocking `send` and `recv` on a plain socket, for the fake peers.
enum PlainSocket {
    static func send(_ socket: CInt, _ bytes: [UInt8]) throws {
        let sent = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw Errno.current }
    }

    static func receive(_ socket: CInt, upTo size: Int = 65_536) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: size)
        let received = buffer.withUnsafeMutableBytes { Glibc.recv(socket, $0.baseAddress, $0.count, 0) }
        guard received >= 0 else { throw Errno.current }
        return Array(buffer.prefix(received))
    }
}
