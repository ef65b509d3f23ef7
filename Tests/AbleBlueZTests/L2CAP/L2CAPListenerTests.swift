import Able
import AbleIO
import AbleTestSupport
import CBluetooth
import Foundation
import Testing

@testable import AbleBlueZ

/// ``L2CAPListener`` against `FakeL2CAPKernel`, whose listening "L2CAP" socket is an AF_UNIX one.
struct L2CAPListenerTests {
    private func listen(
        _ kernel: FakeL2CAPKernel,
        psm: PSM = .automatic,
        security: L2CAPChannel.SecurityLevel = .low,
        receiveMTU: Int? = nil
    ) throws -> L2CAPListener {
        try KernelL2CAP.listen(
            psm: psm, adapterAddress: nil, security: security, receiveMTU: receiveMTU, watermarks: .default,
            backlog: 32, operations: kernel.operations)
    }

    @Test(
        "A listener binds an LE socket to the PSM and reports the one it got",
        .timeLimit(.minutes(1)),
        arguments: [(PSM.automatic, PSM(rawValue: 0x0080)), (PSM(rawValue: 0x00C1), PSM(rawValue: 0x00C1))]
    )
    func boundPSM(requested: PSM, reported: PSM) async throws {
        let kernel = FakeL2CAPKernel()
        let listener = try listen(kernel, psm: requested, security: .high, receiveMTU: 1024)
        #expect(listener.psm == reported)
        #expect(
            kernel.boundAddresses == [
                L2CAPSocketAddress(address: nil, addressType: UInt8(ABLE_BDADDR_LE_PUBLIC), psm: requested)
            ])
        #expect(
            kernel.options == [
                .init(level: ABLE_SOL_BLUETOOTH, name: ABLE_BT_SECURITY, value: [UInt8(ABLE_BT_SECURITY_HIGH), 0]),
                .init(level: ABLE_SOL_BLUETOOTH, name: ABLE_BT_RCVMTU, value: [0x00, 0x04]),
            ])
        await listener.close()
        #expect(kernel.openSockets.isEmpty)
    }

    @Test("A peer that connects arrives as a channel that exchanges SDUs", .timeLimit(.minutes(1)))
    func accept() async throws {
        let kernel = FakeL2CAPKernel(.init(sendMTU: 100, receiveMTU: 200))
        let listener = try listen(kernel)
        let client = try kernel.connectClient()
        defer { close(client) }
        var channels = listener.channels.makeAsyncIterator()
        let channel = try #require(try await channels.next())
        #expect(channel.peerAddress == "11:22:33:44:55:66")
        #expect(channel.peerAddressType == .random)
        #expect(channel.sendMTU == 100)
        #expect(channel.receiveMTU == 200)

        try PlainSocket.send(client, [1, 2])
        var packets = channel.packets.makeAsyncIterator()
        #expect(try await packets.next() == [1, 2])
        try await channel.send([3])
        #expect(try PlainSocket.receive(client) == [3])

        await listener.close()
        #expect(try await channels.next() == nil)
        // Closing the listener leaves accepted channels open.
        try await channel.send([4])
        #expect(try PlainSocket.receive(client) == [4])
        await channel.close()
        #expect(kernel.openSockets.isEmpty)
    }

    @Test(
        "A listener stops accepting while 16 channels wait for the consumer, and loses none",
        .timeLimit(.minutes(1))
    )
    func acceptBackpressure() async throws {
        let kernel = FakeL2CAPKernel()
        let listener = try listen(kernel)
        var clients: [CInt] = []
        defer { for client in clients { close(client) } }
        for _ in 0..<24 { clients.append(try kernel.connectClient()) }
        try await waitUntil { listener.core.channels.isProducerPaused }
        #expect(listener.core.channels.bufferedCount == 16)

        var accepted: [L2CAPChannel] = []
        for try await channel in listener.channels {
            accepted.append(channel)
            if accepted.count == clients.count { break }
        }
        for (index, client) in clients.enumerated() { try PlainSocket.send(client, [UInt8(index)]) }
        var firstBytes: Set<UInt8> = []
        for channel in accepted {
            var packets = channel.packets.makeAsyncIterator()
            firstBytes.insert(try #require(try await packets.next())[0])
            await channel.close()
        }
        #expect(firstBytes == Set(0..<24))
        await listener.close()
        #expect(kernel.openSockets.isEmpty)
    }

    @Test("Closing the listener ends a waiting iteration", .timeLimit(.minutes(1)))
    func closeEndsWaitingIteration() async throws {
        let kernel = FakeL2CAPKernel()
        let listener = try listen(kernel)
        let waiting = Task {
            var channels = listener.channels.makeAsyncIterator()
            return try await channels.next()
        }
        try await Task.sleep(for: .milliseconds(20))
        await listener.close()
        #expect(try await waiting.value == nil)
    }

    @Test(
        "PSMs outside the LE ranges are refused",
        .timeLimit(.minutes(1)),
        arguments: [PSM(rawValue: 0x0100), PSM(rawValue: 0x1001)]
    )
    func invalidPSM(psm: PSM) throws {
        let kernel = FakeL2CAPKernel()
        let error = #expect(throws: BluetoothError.self) { try listen(kernel, psm: psm) }
        #expect(error?.code == .invalidArguments)
        #expect(kernel.openSockets.isEmpty)
    }
}
