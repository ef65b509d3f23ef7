import AbleTestSupport
import Foundation
import Testing

@testable import AbleCore

/// Sends of several SDUs at once (`L2CAPChannel.send(contentsOf:)`, and `ChannelCore`'s, which a
/// firmware-style sequence of writes without response goes through): in order, whole, one
/// wake-up of the sender.
struct L2CAPBatchSendTests {
    static func packet(_ index: Int, length: Int) -> [UInt8] {
        [UInt8(index >> 8), UInt8(index & 0xFF)] + [UInt8](repeating: 0xA5, count: length - 2)
    }

    /// A channel pair whose sender has a batch of `count` packets of `length` bytes waiting for
    /// room: the socket holds 8 KB and the receiver reads only one packet ahead until asked.
    static func waitingBatch(
        count: Int, length: Int
    ) async throws -> (sender: L2CAPChannel, receiver: L2CAPChannel, batch: [[UInt8]], sending: Task<Void, any Error>) {
        let (sender, receiver) = try L2CAPChannel.makePair(
            mtu: 1000, watermarks: .init(high: 1, low: 0), socketBufferSize: 8 * 1024)
        let batch = (0..<count).map { packet($0, length: length) }
        let sending = Task { try await sender.send(contentsOf: batch) }
        try await waitUntil { sender.pendingSendCount > 0 }
        return (sender, receiver, batch, sending)
    }

    @Test(
        "A batch larger than the socket holds arrives complete and in order, its sender waiting once",
        .timeLimit(.minutes(1)))
    func aLargeBatchArrivesWhole() async throws {
        let count = 600
        let (sender, receiver) = try L2CAPChannel.makePair(
            mtu: 1000, watermarks: .init(high: 4, low: 1), socketBufferSize: 8 * 1024)
        let packets = (0..<count).map { Self.packet($0, length: 200) }
        let sending = Task { try await sender.send(contentsOf: packets) }
        var received: [[UInt8]] = []
        for try await packet in receiver.packets {
            received.append(packet)
            if received.count == count { break }
        }
        try await sending.value
        #expect(received == packets)
        // The socket filled (it holds far fewer than 600), so the batch waited, once.
        #expect(sender.sendWaitCount == 1)
        #expect(sender.pendingSendCount == 0)
        await sender.close()
        await receiver.close()
    }

    @Test("Sends queued behind a batch keep their order", .timeLimit(.minutes(1)))
    func sendsAfterABatchKeepTheirOrder() async throws {
        let (sender, receiver, batch, first) = try await Self.waitingBatch(count: 100, length: 500)
        let second = Task { try await sender.send(Self.packet(100, length: 3)) }
        try await waitUntil { sender.pendingSendCount > 0 && sender.sendWaitCount == 2 }
        var received: [[UInt8]] = []
        for try await packet in receiver.packets {
            received.append(packet)
            if received.count == 101 { break }
        }
        try await first.value
        try await second.value
        #expect(received == batch + [Self.packet(100, length: 3)])
        await sender.close()
        await receiver.close()
    }

    @Test(
        "Cancelling a batch that waits drops the packets still queued, keeps those sent, and later sends go on",
        .timeLimit(.minutes(1)))
    func cancellingAWaitingBatch() async throws {
        let (sender, receiver, batch, sending) = try await Self.waitingBatch(count: 500, length: 1000)
        sending.cancel()
        let result = await sending.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(sender.pendingSendCount == 0)

        let receiving = Task {
            var received: [[UInt8]] = []
            for try await packet in receiver.packets {
                if packet == [2] { break }
                received.append(packet)
            }
            return received
        }
        try await sender.send([2])
        let received = try await receiving.value
        // A prefix of the batch went out, then nothing of it.
        #expect(!received.isEmpty)
        #expect(received.count < batch.count)
        #expect(received == Array(batch.prefix(received.count)))
        await sender.close()
        await receiver.close()
    }

    @Test("A batch waiting when the peer closes ends with the channel's error", .timeLimit(.minutes(1)))
    func thePeerClosingEndsAWaitingBatch() async throws {
        let (sender, receiver, _, sending) = try await Self.waitingBatch(count: 500, length: 1000)
        await receiver.close()
        let error = await #expect(throws: BluetoothError.self) { try await sending.value }
        #expect(error?.code == .disconnected)
        #expect(sender.pendingSendCount == 0)
        await sender.close()
    }

    @Test("A batch with a packet the channel can never send is refused before anything goes")
    func aBatchWithAnUnsendablePacketSendsNothing() async throws {
        let (sender, receiver) = try L2CAPChannel.makePair(mtu: 100)
        for bad in [[UInt8](), [UInt8](repeating: 1, count: 101)] {
            let error = await #expect(throws: BluetoothError.self) {
                try await sender.send(contentsOf: [[1], bad, [3]])
            }
            #expect(error?.code == (bad.isEmpty ? .invalidArguments : .valueTooLong))
        }
        try await sender.send(contentsOf: [])
        try await sender.send([9])
        var packets = receiver.packets.makeAsyncIterator()
        #expect(try await packets.next() == [9])
        await sender.close()
        await receiver.close()
    }
}
