import AbleCore
import Foundation
import Testing

struct BluetoothAddressTests {
    @Test(
        "An address parses in either case and prints uppercase, as BlueZ writes it",
        arguments: ["00:AA:01:01:00:01", "00:aa:01:01:00:01", "00:Aa:01:01:00:01"])
    func parsesIgnoringCase(text: String) throws {
        let address = try #require(BluetoothAddress(text))
        #expect(address.description == "00:AA:01:01:00:01")
        #expect(address.bytes == [0x00, 0xAA, 0x01, 0x01, 0x00, 0x01])
    }

    @Test(
        "Text that is no address is rejected",
        arguments: [
            "", "00:AA:01:01:00", "00:AA:01:01:00:01:02", "00-AA-01-01-00-01", "00:AA:01:01:00:0G",
            "0:AAA:01:01:00:01", "00:AA:01:01:00:1", "00:AA:01:01:00:011", "00AA:01:01:00:01:",
            "00:AA:01:01::0001", "dev_00_AA_01_01_00_01", "+0:AA:01:01:00:01", "00:AA:01:01:00:é",
        ]
    )
    func malformedTextIsRejected(text: String) {
        #expect(BluetoothAddress(text) == nil)
    }

    @Test("Kernel byte order is the reverse of the text order")
    func littleEndianBytes() throws {
        let address: BluetoothAddress = "C0:FF:EE:00:11:22"
        #expect(address.littleEndianBytes == [0x22, 0x11, 0x00, 0xEE, 0xFF, 0xC0])
        #expect(BluetoothAddress(littleEndianBytes: address.littleEndianBytes) == address)
        #expect(BluetoothAddress(bytes: address.bytes) == address)
    }

    @Test("Byte counts other than six are rejected", arguments: [0, 5, 7])
    func wrongByteCountsAreRejected(count: Int) {
        let bytes = [UInt8](repeating: 1, count: count)
        #expect(BluetoothAddress(bytes: bytes) == nil)
        #expect(BluetoothAddress(littleEndianBytes: bytes) == nil)
    }

    @Test("Addresses sort from the most significant byte")
    func ordering() {
        let addresses: [BluetoothAddress] = ["FF:00:00:00:00:00", "00:00:00:00:00:FF", "00:00:00:00:01:00"]
        #expect(
            addresses.sorted().map(\.description) == ["00:00:00:00:00:FF", "00:00:00:00:01:00", "FF:00:00:00:00:00"])
    }

    @Test("Equal addresses hash alike whatever case they were written in")
    func hashing() {
        let set: Set<BluetoothAddress> = ["AA:BB:CC:DD:EE:FF", "aa:bb:cc:dd:ee:ff"]
        #expect(set.count == 1)
    }

    @Test("An address encodes as its text and decodes from it")
    func codable() throws {
        let address: BluetoothAddress = "00:AA:01:01:00:01"
        let encoded = try JSONEncoder().encode([address])
        #expect(String(decoding: encoded, as: UTF8.self) == #"["00:AA:01:01:00:01"]"#)
        #expect(try JSONDecoder().decode([BluetoothAddress].self, from: encoded) == [address])
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([BluetoothAddress].self, from: Data(#"["00:AA"]"#.utf8))
        }
    }

    @Test("A string literal that is no address stops the program")
    func invalidLiteralTraps() async {
        await #expect(processExitsWith: .failure) {
            _ = BluetoothAddress(stringLiteral: "00:AA")
        }
    }

    @Test("Address types carry BlueZ's names")
    func addressTypes() {
        #expect(BluetoothAddress.AddressType.public.rawValue == "public")
        #expect(BluetoothAddress.AddressType.random.rawValue == "random")
        #expect(BluetoothAddress.AddressType(rawValue: "random") == .random)
        #expect(BluetoothAddress.AddressType.public.description == "public")
    }
}
