import AbleIO
import AbleTestSupport

@testable import AbleCore

extension FaultInjection {
    /// A channel with these faults, and an ordinary channel connected to it.
    func makePair(
        mtu: Int = 4096,
        watermarks: L2CAPPacketStream.Watermarks = .default
    ) throws -> (faulty: L2CAPChannel, peer: L2CAPChannel) {
        let (first, second) = try L2CAPChannel.makeSocketPair(mtu: mtu)
        let faulty = try L2CAPChannel.wrapping(
            socket: first, sendMTU: mtu, receiveMTU: mtu, watermarks: watermarks, operations: operations)
        let peer = try L2CAPChannel.wrapping(socket: second, sendMTU: mtu, receiveMTU: mtu, watermarks: watermarks)
        return (faulty, peer)
    }
}
