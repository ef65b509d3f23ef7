import AbleTestSupport
import Foundation
import Testing

@testable import AbleCore

struct L2CAPTransferTests {
    /// The SDUs of a transfer, made again identically on the receiving side from the same seed:
    /// each is a slice of a random pool with its first four bytes replaced by its index.
    struct Script {
        static let pool: [UInt8] = {
            var generator = SeededGenerator(seed: 0xA61E)
            return (0..<(128 * 1024)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }()

        var generator: SeededGenerator
        let sizes: ClosedRange<Int>
        var index: UInt32 = 0

        init(seed: UInt64, sizes: ClosedRange<Int>) {
            generator = SeededGenerator(seed: seed)
            self.sizes = sizes
        }

        private mutating func nextShape() -> (index: UInt32, offset: Int, size: Int) {
            let size = Int.random(in: sizes, using: &generator)
            let offset = Int.random(in: 0...(Self.pool.count - size), using: &generator)
            defer { index += 1 }
            return (index, offset, size)
        }

        /// The next SDU to send.
        mutating func next() -> [UInt8] {
            let (index, offset, size) = nextShape()
            var packet = Array(Self.pool[offset..<(offset + size)])
            withUnsafeBytes(of: index.littleEndian) { header in
                for (position, byte) in header.prefix(size).enumerated() { packet[position] = byte }
            }
            return packet
        }

        /// Whether `packet` is the next SDU, compared without making a copy of it.
        mutating func matchesNext(_ packet: [UInt8]) -> Bool {
            let (index, offset, size) = nextShape()
            guard packet.count == size else { return false }
            let header = withUnsafeBytes(of: index.littleEndian) { Array($0.prefix(size)) }
            guard packet.prefix(header.count).elementsEqual(header) else { return false }
            guard size > header.count else { return true }
            return packet.withUnsafeBytes { received in
                Self.pool.withUnsafeBytes { pool in
                    memcmp(
                        received.baseAddress! + header.count, pool.baseAddress! + offset + header.count,
                        size - header.count) == 0
                }
            }
        }
    }

    @Test(
        "Thousands of SDUs of random sizes arrive in order and intact",
        .timeLimit(.minutes(1)),
        arguments: [
            // 100,000 of each took over a minute on a loaded machine (3.3 GB of SDUs up to 64 KiB;
            // 100 MB of small ones through a 4-SDU window), which measured the machine, not the
            // order of the SDUs.
            (65_535, L2CAPPacketStream.Watermarks.default, 10_000),
            (2_048, L2CAPPacketStream.Watermarks(high: 4, low: 1), 20_000),
        ]
    )
    func orderAndIntegrity(largest: Int, watermarks: L2CAPPacketStream.Watermarks, total: Int) async throws {
        // A sanitizer build sends fewer, each several times slower.
        let count = total / Sanitizers.slowdown
        let seed: UInt64 = 20_240_501
        let (a, b) = try L2CAPChannel.makePair(mtu: 65_535, watermarks: watermarks)
        let sender = Task {
            var script = Script(seed: seed, sizes: 1...largest)
            for _ in 0..<count { try await a.send(script.next()) }
        }
        var script = Script(seed: seed, sizes: 1...largest)
        var received = 0
        var mismatches = 0
        for try await packet in b.packets {
            if !script.matchesNext(packet) { mismatches += 1 }
            received += 1
            if received == count { break }
        }
        try await sender.value
        #expect(received == count)
        #expect(mismatches == 0)
        await a.close()
        await b.close()
    }

    @Test(
        "An AF_UNIX SOCK_SEQPACKET pair carries SDUs up to its SO_SNDBUF less 32 bytes, and the pair checks it",
        .timeLimit(.minutes(1)),
        arguments: [(65_535, 256 * 1024, true), (65_535, 16 * 1024, false), (2_048, 4 * 1024, true)]
    )
    func socketBufferBoundsTheMTU(mtu: Int, socketBufferSize: Int, fits: Bool) async throws {
        guard fits else {
            let error = #expect(throws: BluetoothError.self) {
                try L2CAPChannel.makePair(mtu: mtu, socketBufferSize: socketBufferSize)
            }
            #expect(error?.code == .valueTooLong)
            return
        }
        let (a, b) = try L2CAPChannel.makePair(mtu: mtu, socketBufferSize: socketBufferSize)
        let largest = [UInt8](repeating: 0xEE, count: mtu)
        try await a.send(largest)
        var packets = b.packets.makeAsyncIterator()
        #expect(try await packets.next() == largest)
        await a.close()
        await b.close()
    }
}
