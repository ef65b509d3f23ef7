import Able
import AbleIO
import CBluetooth
import Testing

@testable import AbleBlueZ

struct L2CAPSocketAddressTests {
    @Test("A sockaddr_l2 holds the PSM little-endian, the address reversed and the LE type")
    func layout() throws {
        let address = try L2CAPSocketAddress(address: "00:AA:01:02:03:04", type: .random, psm: PSM(rawValue: 0x1081))
        let bytes = address.withUnsafeBytes { Array($0) }
        #expect(bytes.count == MemoryLayout<sockaddr_l2>.size)
        #expect(bytes[0..<2] == [UInt8(ABLE_AF_BLUETOOTH), 0])
        #expect(bytes[2..<4] == [0x81, 0x10])
        #expect(bytes[4..<10] == [0x04, 0x03, 0x02, 0x01, 0xAA, 0x00])
        #expect(bytes[10..<12] == [0, 0])
        #expect(bytes[12] == UInt8(ABLE_BDADDR_LE_RANDOM))
        #expect(bytes.withUnsafeBytes { L2CAPSocketAddress(bytes: $0) } == address)
    }

    @Test("No adapter address binds to BDADDR_ANY")
    func anyAdapter() throws {
        let address = try L2CAPSocketAddress(address: nil, type: .public, psm: .automatic)
        let bytes = address.withUnsafeBytes { Array($0) }
        #expect(bytes[2..<10].allSatisfy { $0 == 0 })
        #expect(bytes[12] == UInt8(ABLE_BDADDR_LE_PUBLIC))
        #expect(bytes.withUnsafeBytes { L2CAPSocketAddress(bytes: $0) }?.address == nil)
    }

    @Test("The security levels are the kernel's BT_SECURITY values")
    func securityLevels() {
        #expect(L2CAPChannel.SecurityLevel.low.rawValue == UInt8(ABLE_BT_SECURITY_LOW))
        #expect(L2CAPChannel.SecurityLevel.medium.rawValue == UInt8(ABLE_BT_SECURITY_MEDIUM))
        #expect(L2CAPChannel.SecurityLevel.high.rawValue == UInt8(ABLE_BT_SECURITY_HIGH))
        #expect(L2CAPChannel.SecurityLevel.fips.rawValue == UInt8(ABLE_BT_SECURITY_FIPS))
    }
}
