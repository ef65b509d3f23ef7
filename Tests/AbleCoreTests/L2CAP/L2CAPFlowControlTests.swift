import AbleIO
import AbleTestSupport
import Foundation
import Synchronization
import Testing

@testable import AbleCore

/// Backpressure in both directions, and the cancellation of waiting sends and receives.
struct L2CAPFlowControlTests {
    @Test(
        "A slow consumer stops the reader at the high watermark, then the sender, and loses nothing",
        .timeLimit(.minutes(1)),
        arguments: [L2CAPPacketStream.Watermarks(high: 8, low: 2), .init(high: 32, low: 31), .init(high: 1, low: 0)]
    )
    func slowConsumer(watermarks: L2CAPPacketStream.Watermarks) async throws {
        let count = 300
        let (sender, receiver) = try L2CAPChannel.makePair(
            mtu: 1000, watermarks: watermarks, socketBufferSize: 16 * 1024)
        let sending = Task {
            for index in 0..<count {
                try await sender.send([UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 1000))
            }
        }
        // The receiver reads up to the high watermark and stops; the socket fills; the sender waits.
        try await waitUntil { sender.pendingSendCount == 1 && receiver.isReadingPaused }
        #expect(receiver.bufferedPacketCount == watermarks.high)
        try await Task.sleep(for: .milliseconds(50))
        #expect(receiver.bufferedPacketCount == watermarks.high)
        #expect(sender.pendingSendCount == 1)

        var received = 0
        var mostBuffered = 0
        var packets = receiver.packets.makeAsyncIterator()
        func take(_ number: Int) async throws {
            for _ in 0..<number {
                let packet = try #require(try await packets.next())
                #expect(packet == [UInt8](repeating: UInt8(truncatingIfNeeded: received), count: 1000))
                received += 1
                mostBuffered = max(mostBuffered, receiver.bufferedPacketCount)
            }
        }
        // Down to the low watermark: reading restarts, refills to the high one and stops again
        // (the sender has far more than that to send).
        try await take(watermarks.high - watermarks.low)
        try await waitUntil { receiver.readPauseCount >= 2 }
        #expect(receiver.bufferedPacketCount == watermarks.high)
        try await take(count - received)
        try await sending.value
        #expect(received == count)
        #expect(mostBuffered <= watermarks.high)
        #expect(receiver.readPauseCount > 1)
        #expect(sender.sendWaitCount > 0)
        await sender.close()
        await receiver.close()
    }

    @Test(
        "Both ends send 1,000 SDUs of 672 bytes before reading any, and all arrive",
        .timeLimit(.minutes(1))
    )
    func fullDuplex() async throws {
        let count = 1000
        let (a, b) = try L2CAPChannel.makePair(mtu: 672)
        func exchange(_ channel: L2CAPChannel, mark: UInt8) async throws -> [UInt8] {
            for index in 0..<count {
                var packet = [UInt8](repeating: mark, count: 672)
                packet[0] = UInt8(truncatingIfNeeded: index)
                try await channel.send(packet)
            }
            var firstBytes: [UInt8] = []
            for try await packet in channel.packets {
                #expect(packet.count == 672 && packet[1] != mark)
                firstBytes.append(packet[0])
                if firstBytes.count == count { break }
            }
            return firstBytes
        }
        async let fromB = exchange(a, mark: 0xA)
        async let fromA = exchange(b, mark: 0xB)
        let expected = (0..<count).map { UInt8(truncatingIfNeeded: $0) }
        #expect(try await fromB == expected)
        #expect(try await fromA == expected)
        await a.close()
        await b.close()
    }

    @Test("Cancelling a send that waits for room sends nothing of it, and later sends go on", .timeLimit(.minutes(1)))
    func cancelWaitingSend() async throws {
        let (sender, receiver) = try L2CAPChannel.makePair(
            mtu: 1000, watermarks: .init(high: 1, low: 0), socketBufferSize: 8 * 1024)
        // Fill the socket until a send has to wait.
        let sent = Locked(0)
        let filler = Task {
            while true {
                try await sender.send([UInt8](repeating: 1, count: 1000))
                sent.value += 1
            }
        }
        try await waitUntil { sender.pendingSendCount == 1 }
        filler.cancel()
        let result = await filler.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(sender.pendingSendCount == 0)

        // Every send that returned arrives, then the one after the cancelled one; the cancelled
        // one does not.
        let receiving = Task {
            var ones = 0
            for try await packet in receiver.packets {
                if packet == [2] { return ones }
                #expect(packet == [UInt8](repeating: 1, count: 1000))
                ones += 1
            }
            return ones
        }
        try await sender.send([2])
        #expect(try await receiving.value == sent.value)
        #expect(sent.value > 0)
        await sender.close()
        await receiver.close()
    }

    @Test("Cancelling a receive that waits ends the stream, and the channel goes on sending", .timeLimit(.minutes(1)))
    func cancelWaitingReceive() async throws {
        // Only the receiver reads the end of its socket: the sender closes its own.
        let endRead = Atomic(false)
        var operations = SocketOperations.system
        operations.receive = { socket, buffer, flags in
            let result = SocketOperations.system.receive(socket, buffer, flags)
            if case .success(0) = result { endRead.store(true, ordering: .relaxed) }
            return result
        }
        let (sender, receiver) = try L2CAPChannel.makePair(mtu: 64, operations: operations)
        let waiting = Task {
            var packets = receiver.packets.makeAsyncIterator()
            return try await packets.next()
        }
        try await waitUntil { receiver.receiveWaitCount == 1 }
        waiting.cancel()
        #expect(try await waiting.value == nil)

        // Later calls, from any task, see the end.
        try await sender.send([5])
        var packets = receiver.packets.makeAsyncIterator()
        #expect(try await packets.next() == nil)
        // The channel still sends, and the peer closing it is still noticed.
        try await receiver.send([6])
        var replies = sender.packets.makeAsyncIterator()
        #expect(try await replies.next() == [6])
        await sender.close()
        try await waitUntil { endRead.load(ordering: .relaxed) }
        let error = await #expect(throws: BluetoothError.self) { try await receiver.send([7]) }
        #expect(error?.code == .disconnected)
        await receiver.close()
    }

    @Test(
        "After a cancelled receive the channel discards what arrives, so that the peer never stalls",
        .timeLimit(.minutes(1))
    )
    func cancelledReceiveKeepsThePeerSending() async throws {
        let (sender, receiver) = try L2CAPChannel.makePair(
            mtu: 1000, watermarks: .init(high: 1, low: 0), socketBufferSize: 8 * 1024)
        // The reader stops at the high watermark and the socket fills: the sender waits.
        let sending = Task {
            for _ in 0..<200 { try await sender.send([UInt8](repeating: 1, count: 1000)) }
        }
        try await waitUntil { sender.pendingSendCount == 1 && receiver.isReadingPaused }
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var packets = receiver.packets.makeAsyncIterator()
            return try await packets.next()
        }
        // The SDU already buffered is still delivered, then the end.
        #expect(try await cancelled.value == [UInt8](repeating: 1, count: 1000))
        var packets = receiver.packets.makeAsyncIterator()
        #expect(try await packets.next() == nil)
        // Far more than the watermark and the socket hold gets through.
        try await sending.value
        #expect(!receiver.isReadingPaused)
        #expect(receiver.bufferedPacketCount == 0)
        await sender.close()
        await receiver.close()
    }

    @Test("A receive in an already-cancelled task ends the stream without waiting", .timeLimit(.minutes(1)))
    func receiveInCancelledTask() async throws {
        let (sender, receiver) = try L2CAPChannel.makePair(mtu: 64)
        let waiting = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var packets = receiver.packets.makeAsyncIterator()
            return try await packets.next()
        }
        #expect(try await waiting.value == nil)
        await sender.close()
        await receiver.close()
    }

    @Test("Two tasks waiting on one stream: the second is told another waits", .timeLimit(.minutes(1)))
    func concurrentReceivers() async throws {
        let (sender, receiver) = try L2CAPChannel.makePair(mtu: 64)
        let first = Task {
            var packets = receiver.packets.makeAsyncIterator()
            return try await packets.next()
        }
        try await Task.sleep(for: .milliseconds(20))
        var packets = receiver.packets.makeAsyncIterator()
        let error = await #expect(throws: BluetoothError.self) { try await packets.next() }
        #expect(error?.code == .inProgress)
        try await sender.send([1])
        #expect(try await first.value == [1])
        await sender.close()
        await receiver.close()
    }

    @Test(
        "Sends over the MTU or empty are refused before reaching the socket",
        .timeLimit(.minutes(1)),
        arguments: [(0, BluetoothError.Code.invalidArguments), (65, .valueTooLong)]
    )
    func invalidSizes(size: Int, code: BluetoothError.Code) async throws {
        let (sender, receiver) = try L2CAPChannel.makePair(mtu: 64)
        let error = await #expect(throws: BluetoothError.self) {
            try await sender.send([UInt8](repeating: 0, count: size))
        }
        #expect(error?.code == code)
        try await sender.send([UInt8](repeating: 0, count: 64))
        var packets = receiver.packets.makeAsyncIterator()
        #expect(try await packets.next()?.count == 64)
        await sender.close()
        await receiver.close()
    }

    @Test(
        "A peer that never lets the socket run dry does not keep the read handler from the channel's queue",
        .timeLimit(.minutes(1))
    )
    func readHandlerTakesBatches() async throws {
        // A socket that always has another SDU: without a bound, one run of the read handler
        // would fill the buffer to the high watermark while a consumer on the channel's executor
        // (the same queue) waits for its turn.
        var endless = SocketOperations.system
        endless.receive = { _, buffer, _ in
            buffer.storeBytes(of: 0xAB, as: UInt8.self)
            return .success(1)
        }
        let (socket, peer) = try L2CAPChannel.makeSocketPair(mtu: 64)
        defer { close(peer) }
        let watermarks = L2CAPPacketStream.Watermarks(high: 1000, low: 100)
        let channel = try L2CAPChannel.wrapping(
            socket: socket, sendMTU: 64, receiveMTU: 64, watermarks: watermarks, operations: endless)
        // Readable for good: `receive` above never drains it.
        #expect(write(peer, [UInt8(1)], 1) == 1)

        try await waitUntil { channel.isReadingPaused }
        #expect(channel.bufferedPacketCount == watermarks.high)
        #expect(channel.longestReadRun == ChannelCore.readBatch.packets)
        var packets = channel.packets.makeAsyncIterator()
        for _ in 0..<watermarks.high { #expect(try await packets.next() == [0xAB]) }
        await channel.close()
    }
}
