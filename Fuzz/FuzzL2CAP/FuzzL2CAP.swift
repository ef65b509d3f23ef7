// Fuzzes what the L2CAP code reads from the kernel: socket addresses (`struct sockaddr_l2`, as
// `accept` and `getsockname` write them), and the receiving side of a channel, whose `recv`
// results (lengths, truncated SDUs, EAGAIN, EINTR, resets, the end) come from the input through
// replaced socket calls. Every SDU handed out must be the bytes received and fit the receive MTU,
// and once the channel has ended it must report the same end again.

import AbleCore
import AbleIO

@testable import AbleBlueZ
@testable import AbleCore

#if canImport(Glibc)
    import Glibc
#endif

@_cdecl("FuzzL2CAP_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv, testOneInput)
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var reader = FuzzReader(fuzzInput(data, size))
    if reader.byte() & 1 == 0 {
        socketAddress(reader.rest())
    } else {
        receive(&reader)
    }
    return 0
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}

private func socketAddress(_ bytes: [UInt8]) {
    let parsed = bytes.withUnsafeBytes { L2CAPSocketAddress(bytes: $0) }
    guard let parsed else { return }
    let again = parsed.withUnsafeBytes { L2CAPSocketAddress(bytes: $0) }
    check(again == parsed, "\(parsed) does not survive its own bytes")
    _ = L2CAPSocketAddress.addressType(kernelType: parsed.addressType)
}

/// The `recv` results of one run, taken in turn by the replaced socket call.
private final class Script: @unchecked Sendable {
    var results: [(length: Int, errno: CInt)]
    var next = 0
    /// The lengths of the SDUs the kernel handed over, in order.
    var delivered: [Int] = []

    init(_ results: [(length: Int, errno: CInt)]) { self.results = results }
}

private func receive(_ reader: inout FuzzReader) {
    // Small MTUs most of the time; now and then one past the direct-receive threshold.
    let choice = reader.uint16()
    let mtu = choice & 0x8000 != 0 ? 4096 + Int(choice & 0x3FFF) : Int(choice % 300)
    var results: [(length: Int, errno: CInt)] = []
    while !reader.isAtEnd {
        let kind = reader.byte()
        switch kind % 8 {
        case 0: results.append((0, EAGAIN))
        case 1: results.append((0, EINTR))
        case 2: results.append((0, ECONNRESET))
        case 3: results.append((0, EIO))
        case 4: results.append((0, 0))
        case 5: results.append((mtu + Int(reader.byte()), 0))
        default: results.append((max(1, min(mtu, Int(reader.uint16()) % (mtu + 1))), 0))
        }
    }
    let script = Script(results)
    var operations = SocketOperations.system
    operations.receive = { _, buffer, _ in
        guard script.next < script.results.count else { return .failure(Errno(EAGAIN)) }
        let (length, errno) = script.results[script.next]
        script.next += 1
        if errno != 0 { return .failure(Errno(errno)) }
        // The kernel writes what fits and, with MSG_TRUNC, reports the real length.
        let written = min(length, buffer.count)
        for index in 0..<written { buffer[index] = UInt8(truncatingIfNeeded: index &+ length) }
        if length > 0 { script.delivered.append(length) }
        return .success(length)
    }
    let receiver = PacketReceiver(socket: -1, operations: operations, receiveMTU: mtu)
    var ended = false
    var received: [Int] = []
    for _ in 0...(results.count + 1) {
        switch receiver.receive() {
        case .packet(let packet):
            check(!ended, "an SDU after the end")
            check(packet.count <= mtu, "an SDU of \(packet.count) bytes over the MTU \(mtu)")
            for (index, byte) in packet.enumerated() {
                check(byte == UInt8(truncatingIfNeeded: index &+ packet.count), "SDU byte \(index) is wrong")
            }
            received.append(packet.count)
        case .wouldBlock:
            check(!ended, "would block after the end")
        case .end(let error):
            ended = true
            if let error { _ = error.description }
            guard case .end = receiver.receive() else { fatalError("the end was not reported again") }
        }
        if ended { break }
    }
    // Every SDU the kernel handed over within the MTU came out, in order.
    let expected = script.delivered.prefix { $0 <= mtu }
    check(received == Array(expected.prefix(received.count)), "SDUs \(received) for \(script.delivered)")
}
