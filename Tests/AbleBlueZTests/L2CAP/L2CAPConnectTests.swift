import Able
import AbleIO
import AbleTestSupport
import CBluetooth
import Foundation
import Testing

@testable import AbleBlueZ

/// ``L2CAPChannel/connect(to:type:psm:from:security:receiveMTU:watermarks:timeout:)`` against
/// `FakeL2CAPKernel`, which records what the kernel would be told and answers as configured.
struct L2CAPConnectTests {
    private func connect(
        _ kernel: FakeL2CAPKernel,
        security: L2CAPChannel.SecurityLevel = .low,
        receiveMTU: Int? = nil,
        timeout: Duration = .seconds(5)
    ) async throws -> L2CAPChannel {
        try await KernelL2CAP.connect(
            to: "00:AA:01:02:03:04", type: .random, psm: PSM(rawValue: 0x0081), from: "00:AA:01:01:00:01",
            security: security, receiveMTU: receiveMTU, watermarks: .default, timeout: timeout,
            operations: kernel.operations)
    }

    @Test(
        "Connecting binds an LE socket, sets the options, and connects to the peer's PSM",
        .timeLimit(.minutes(1)),
        arguments: [EINPROGRESS, 0]
    )
    func connectRequest(connectResult: CInt) async throws {
        let kernel = FakeL2CAPKernel(.init(connectResult: connectResult, sendMTU: 247, receiveMTU: 512))
        let channel = try await connect(kernel, security: .medium, receiveMTU: 512)

        #expect(
            kernel.boundAddresses == [
                L2CAPSocketAddress(
                    address: "00:AA:01:01:00:01", addressType: UInt8(ABLE_BDADDR_LE_PUBLIC), psm: .automatic)
            ])
        #expect(
            kernel.connectedAddresses == [
                L2CAPSocketAddress(
                    address: "00:AA:01:02:03:04", addressType: UInt8(ABLE_BDADDR_LE_RANDOM),
                    psm: PSM(rawValue: 0x0081))
            ])
        #expect(
            kernel.options == [
                .init(level: ABLE_SOL_BLUETOOTH, name: ABLE_BT_SECURITY, value: [UInt8(ABLE_BT_SECURITY_MEDIUM), 0]),
                .init(level: ABLE_SOL_BLUETOOTH, name: ABLE_BT_RCVMTU, value: [0x00, 0x02]),
            ])
        #expect(channel.sendMTU == 247)
        #expect(channel.receiveMTU == 512)
        #expect(channel.peerAddress == "00:AA:01:02:03:04")
        #expect(channel.peerAddressType == .random)

        let peer = try #require(kernel.remoteEnds.first)
        try await channel.send([1, 2, 3])
        #expect(try PlainSocket.receive(peer) == [1, 2, 3])
        try PlainSocket.send(peer, [4])
        var packets = channel.packets.makeAsyncIterator()
        #expect(try await packets.next() == [4])
        await channel.close()
        #expect(kernel.openSockets.isEmpty)
    }

    @Test(
        "A failed connection throws by its errno and closes the socket",
        .timeLimit(.minutes(1)),
        arguments: [
            (CInt(EINPROGRESS), CInt(ECONNREFUSED), BluetoothError.Code.connectionAttemptFailed),
            (EINPROGRESS, EACCES, .notPermitted),
            (EINPROGRESS, ETIMEDOUT, .connectionAttemptFailed),
            (EHOSTUNREACH, 0, .connectionAttemptFailed),
            (EINVAL, 0, .invalidArguments),
        ]
    )
    func failedConnection(connectResult: CInt, connectionError: CInt, code: BluetoothError.Code) async throws {
        let kernel = FakeL2CAPKernel(.init(connectResult: connectResult, connectionError: connectionError))
        let error = await #expect(throws: BluetoothError.self) { try await connect(kernel) }
        #expect(error?.code == code)
        #expect((error?.cause as? Errno)?.rawValue == (connectionError != 0 ? connectionError : connectResult))
        #expect(kernel.openSockets.isEmpty)
    }

    @Test(
        "A connection the kernel aborts after raising the socket's security was refused for security",
        .timeLimit(.minutes(1)),
        arguments: [
            (CInt(ECONNABORTED), UInt8(2), BluetoothError.Code.notPermitted),
            (ECONNRESET, 3, .notPermitted),
            (ECONNABORTED, 1, .connectionAttemptFailed),
            (ECONNRESET, 1, .connectionAttemptFailed),
        ]
    )
    func refusedForSecurity(connectionError: CInt, securityAfterFailure: UInt8, code: BluetoothError.Code)
        async throws
    {
        let kernel = FakeL2CAPKernel(
            .init(connectionError: connectionError, securityAfterFailure: securityAfterFailure))
        let error = await #expect(throws: BluetoothError.self) { try await connect(kernel) }
        #expect(error?.code == code)
        #expect((error?.cause as? Errno)?.rawValue == connectionError)
        #expect(kernel.openSockets.isEmpty)
    }

    @Test("A connection that does not complete in time throws timeout and closes the socket", .timeLimit(.minutes(1)))
    func timeout() async throws {
        let kernel = FakeL2CAPKernel(.init(neverWritable: true))
        let start = ContinuousClock.now
        let error = await #expect(throws: BluetoothError.self) {
            try await connect(kernel, timeout: .milliseconds(100))
        }
        #expect(error?.code == .timeout)
        #expect(ContinuousClock.now - start >= .milliseconds(100))
        #expect(kernel.openSockets.isEmpty)
    }

    @Test("Cancelling a connection under way throws CancellationError and closes the socket", .timeLimit(.minutes(1)))
    func cancellation() async throws {
        let kernel = FakeL2CAPKernel(.init(neverWritable: true))
        let connecting = Task { try await connect(kernel, timeout: .seconds(30)) }
        try await waitUntil { !kernel.connectedAddresses.isEmpty }
        connecting.cancel()
        let result = await connecting.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(kernel.openSockets.isEmpty)
    }

    @Test(
        "Arguments the kernel would refuse are refused first",
        .timeLimit(.minutes(1)),
        arguments: [
            (PSM.automatic, BluetoothAddress.AddressType.random, nil as Int?),
            (PSM(rawValue: 0x0081), BluetoothAddress.AddressType(rawValue: "bredr"), nil),
            (PSM(rawValue: 0x0081), .public, 22),
        ]
    )
    func invalidArguments(psm: PSM, type: BluetoothAddress.AddressType, receiveMTU: Int?) async throws {
        let kernel = FakeL2CAPKernel()
        let error = await #expect(throws: BluetoothError.self) {
            try await KernelL2CAP.connect(
                to: "00:AA:01:02:03:04", type: type, psm: psm, from: nil, security: .low, receiveMTU: receiveMTU,
                watermarks: .default, timeout: .seconds(1), operations: kernel.operations)
        }
        #expect(error?.code == .invalidArguments)
        #expect(kernel.openSockets.isEmpty)
    }
}

/// Both ends of an LE channel on a kernel without Bluetooth sockets.
struct L2CAPWithoutBluetoothTests {
    private var noBluetooth: SocketOperations {
        var operations = SocketOperations.system
        operations.socket = { _, _, _ in .failure(Errno(EAFNOSUPPORT)) }
        return operations
    }

    @Test("Listening where the kernel has no Bluetooth throws notSupported")
    func listen() {
        let error = #expect(throws: BluetoothError.self) {
            try KernelL2CAP.listen(
                psm: .automatic, adapterAddress: nil, security: .low, receiveMTU: nil, watermarks: .default,
                backlog: 1, operations: noBluetooth)
        }
        #expect(error?.code == .notSupported)
    }

    @Test("Connecting where the kernel has no Bluetooth throws notSupported", .timeLimit(.minutes(1)))
    func connect() async {
        let error = await #expect(throws: BluetoothError.self) {
            try await KernelL2CAP.connect(
                to: "00:AA:01:02:03:04", type: .public, psm: PSM(rawValue: 0x0080), from: nil, security: .low,
                receiveMTU: nil, watermarks: .default, timeout: .seconds(1), operations: noBluetooth)
        }
        #expect(error?.code == .notSupported)
    }
}
