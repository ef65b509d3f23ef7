import Able

#if canImport(Glibc)
    import Glibc
#endif

/// `AbleBenchmarks l2cap SIZE COUNT WARMUP global|shared|batch`: what `Benchmarks/C/l2cap-socketpair.c`
/// does, through two `L2CAPChannel`s over the same kind of socketpair (AF_UNIX `SOCK_SEQPACKET`,
/// `SO_SNDBUF` 256 KiB, receive buffer of 65,535 bytes).
///
/// One loop sends `WARMUP + COUNT` SDUs of `SIZE` bytes, each with a sequence number in its first
/// 8 bytes, as fast as `send` returns; the other iterates the other channel's `packets`, checks
/// the sequence, and times the last `COUNT` SDUs. With `global` both loops run in tasks on the
/// global executor; with `shared` each runs in an actor that shares its channel's executor, as
/// `L2CAPChannel` documents, so that a wakeup from the socket needs no hop to another thread; with
/// `batch` both run on the global executor and the sender hands over ``l2capBatchLength`` SDUs at a
/// time (`L2CAPChannel.send(contentsOf:)`).
func runL2CAP(size: Int, count: Int, warmup: Int, style: L2CAPSendStyle) async throws -> Measurement {
    guard (1...65_535).contains(size), count > 0 else {
        throw BenchmarkFailure("SIZE must be 1 to 65535 and COUNT at least 1")
    }
    let (sender, receiver) = try L2CAPChannel.makePair(mtu: 65_535)
    let faultsBefore = minorPageFaults()
    let total = count + warmup
    let sending = Task.detached {
        switch style {
        case .global: try await sendSequence(on: sender, size: size, total: total)
        case .shared: try await ChannelRunner(sender).send(size: size, total: total)
        case .batch: try await sendBatches(on: sender, size: size, total: total)
        }
    }
    let check =
        switch style {
        case .global, .batch: try await receiveSequence(on: receiver, size: size, total: total, warmup: warmup)
        case .shared: try await ChannelRunner(receiver).receive(size: size, total: total, warmup: warmup)
        }
    try await sending.value
    printAndFlush(
        "# l2cap-\(size) (\(style)): receiver waited \(receiver.receiveWaitCount) times, paused reading "
            + "\(receiver.readPauseCount) times, received for itself \(receiver.receiveFetchCounts.consumer) times "
            + "(the read source stepped aside \(receiver.receiveFetchCounts.stepAside) times); "
            + "sender waited \(sender.sendWaitCount) times; \(minorPageFaults() - faultsBefore) minor page faults")
    await sender.close()
    await receiver.close()
    return Measurement(
        operations: count, wall: check.last - check.first, start: check.start, end: check.end, lost: check.lost,
        reordered: check.reordered)
}

/// How `l2cap` sends and where its loops run.
enum L2CAPSendStyle: String {
    /// `send(_:)` per SDU, both loops on the global executor.
    case global
    /// `send(_:)` per SDU, each loop in an actor on its channel's executor.
    case shared
    /// `send(contentsOf:)` with ``l2capBatchLength`` SDUs at a time, both loops on the global executor.
    case batch
}

/// How many SDUs the `batch` style hands `send(contentsOf:)` at a time.
let l2capBatchLength = 64

/// What the receiving loop saw.
struct PacketCheck {
    var first = 0.0
    var last = 0.0
    var start = Mark.now()
    var end = Mark.now()
    var lost = 0
    var reordered = 0
}

/// An actor on a channel's executor: its loops wake up on the thread that serves the socket.
actor ChannelRunner {
    let channel: L2CAPChannel

    nonisolated var unownedExecutor: UnownedSerialExecutor { channel.unownedExecutor }

    init(_ channel: L2CAPChannel) {
        self.channel = channel
    }

    func send(size: Int, total: Int) async throws {
        try await sendSequence(on: channel, size: size, total: total)
    }

    func receive(size: Int, total: Int, warmup: Int) async throws -> PacketCheck {
        try await receiveSequence(on: channel, size: size, total: total, warmup: warmup)
    }
}

/// Sends `total` SDUs of `size` bytes numbered from 0, on the caller's executor.
func sendSequence(
    on channel: L2CAPChannel, size: Int, total: Int, isolation: isolated (any Actor)? = #isolation
) async throws {
    // One array, refilled in place: `send` has let go of it when it returns, so it is not copied.
    var packet = [UInt8](repeating: 0x5A, count: size)
    for sequence in 0..<total {
        number(&packet, sequence)
        try await channel.send(packet)
    }
}

/// Sends `total` SDUs of `size` bytes numbered from 0, ``l2capBatchLength`` at a time.
func sendBatches(on channel: L2CAPChannel, size: Int, total: Int) async throws {
    var sequence = 0
    while sequence < total {
        let batch = (sequence..<min(sequence + l2capBatchLength, total)).map { index in
            var packet = [UInt8](repeating: 0x5A, count: size)
            number(&packet, index)
            return packet
        }
        try await channel.send(contentsOf: batch)
        sequence += batch.count
    }
}

/// Writes `sequence` into the first 8 bytes of `packet` (little-endian; fewer if it is shorter).
private func number(_ packet: inout [UInt8], _ sequence: Int) {
    packet.withUnsafeMutableBytes { bytes in
        withUnsafeBytes(of: UInt64(sequence).littleEndian) { header in
            bytes.copyMemory(from: UnsafeRawBufferPointer(rebasing: header.prefix(min(8, bytes.count))))
        }
    }
}

/// Receives `total` SDUs, checking their numbers, and times the ones after the first `warmup`.
func receiveSequence(
    on channel: L2CAPChannel, size: Int, total: Int, warmup: Int, isolation: isolated (any Actor)? = #isolation
) async throws -> PacketCheck {
    var check = PacketCheck()
    var received = 0
    var expected: UInt64 = 0
    check.first = monotonicSeconds()
    var packets = channel.packets.makeAsyncIterator()
    while let packet = try await packets.next(isolation: isolation) {
        guard packet.count == size else { throw BenchmarkFailure("received \(packet.count) bytes, expected \(size)") }
        if size >= 8 {
            let sequence = packet.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
            if sequence > expected { check.lost += Int(sequence - expected) }
            if sequence < expected { check.reordered += 1 } else { expected = sequence + 1 }
        }
        received += 1
        if received == warmup {
            check.start = Mark.now()
            check.first = monotonicSeconds()
        }
        if received == total { break }
    }
    check.last = monotonicSeconds()
    check.end = Mark.now()
    guard received == total else { throw BenchmarkFailure("the stream ended after \(received) of \(total) SDUs") }
    return check
}

/// The minor page faults this process has taken: a fresh page for each, zeroed by the kernel.
func minorPageFaults() -> Int {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return usage.ru_minflt
}
