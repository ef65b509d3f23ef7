import AbleCore
import Foundation
import Testing

struct BluetoothUUIDTests {
    @Test(
        "Every accepted spelling of the Heart Rate service parses to the same UUID",
        arguments: [
            "180D", "180d", "0000180D", "0000180d",
            "0000180D-0000-1000-8000-00805F9B34FB", "0000180d-0000-1000-8000-00805f9b34fb",
        ]
    )
    func spellingsOfOneUUIDAreEqual(text: String) throws {
        let uuid = try #require(BluetoothUUID(text))
        #expect(uuid == .heartRate)
        #expect(uuid.hashValue == BluetoothUUID.heartRate.hashValue)
        #expect(uuid.uuidString == "0000180d-0000-1000-8000-00805f9b34fb")
        #expect(uuid.shortForm == 0x180D)
        #expect(uuid.bitWidth == 16)
    }

    @Test(
        "Text that is no UUID is rejected",
        arguments: [
            "", "180", "180D0", "0x180D", "G80D", "0000180D-0000-1000-8000-00805F9B34F",
            "0000180D-0000-1000-8000-00805F9B34FBA", "0000180D00000-1000-8000-00805F9B34FB",
            "0000180D-0000-1000-8000_00805F9B34FB", "0000180D000010008000" + "00805F9B34FB",
            "0000180D-0000-1000-8000-00805F9B34FG", " 180D", "180D ", "+80D", "-80D", "1 0D",
            "0000180D-0000-1000-8000-00805F9B34\u{00E9}", "0000180D-0000-1000-8000000805F9B34FB",
            "0000180D0-000-1000-8000-00805F9B34FB", "0000-80D", "----",
        ]
    )
    func malformedTextIsRejected(text: String) {
        #expect(BluetoothUUID(text) == nil)
    }

    @Test("A substring parses as the text it spells, and only that text")
    func substringsParse() {
        let line = "UUID=0000180d-0000-1000-8000-00805f9b34fb;"
        #expect(BluetoothUUID(line.dropFirst(5).dropLast()) == .heartRate)
        #expect(BluetoothUUID(line.dropFirst(5)) == nil)
        #expect(BluetoothUUID(line.dropFirst(4).dropLast()) == nil)
    }

    @Test("A 128-bit UUID outside the base range keeps its value and has no short form")
    func customUUIDHasNoShortForm() {
        let uuid: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
        #expect(uuid.uuidString == "12e61727-b41a-436f-b64d-4777b35f2294")
        #expect(uuid.uuid128 == 0x12E6_1727_B41A_436F_B64D_4777_B35F_2294)
        #expect(uuid.shortForm == nil)
        #expect(uuid.bitWidth == 128)
        #expect(uuid.description == uuid.uuidString)
    }

    @Test("A UUID that differs from the base only outside the short-form bits is not a short UUID")
    func nearBaseUUIDIsNotShort() {
        let uuid: BluetoothUUID = "0000180d-0000-1000-8000-00805f9b34fc"
        #expect(uuid.shortForm == nil)
        #expect(uuid != .heartRate)
    }

    @Test("A 32-bit alias above 0xFFFF keeps its 32-bit width")
    func thirtyTwoBitAlias() {
        let uuid: BluetoothUUID = "1234ABCD"
        #expect(uuid == BluetoothUUID(uuid32: 0x1234_ABCD))
        #expect(uuid.uuidString == "1234abcd-0000-1000-8000-00805f9b34fb")
        #expect(uuid.shortForm == 0x1234_ABCD)
        #expect(uuid.bitWidth == 32)
        #expect(uuid.littleEndianBytes == [0xCD, 0xAB, 0x34, 0x12])
        #expect(uuid.bigEndianBytes == [0x12, 0x34, 0xAB, 0xCD])
    }

    @Test("Integer initializers agree with each other and with the text form")
    func integerInitializersAgree() {
        #expect(BluetoothUUID(uuid16: 0x2902) == BluetoothUUID(uuid32: 0x2902))
        #expect(BluetoothUUID(uuid16: 0x2902) == BluetoothUUID(uuid128: 0x0000_2902_0000_1000_8000_0080_5F9B_34FB))
        #expect(BluetoothUUID(uuid16: 0x2902) == .clientCharacteristicConfiguration)
    }

    @Test(
        "Bytes in both orders round-trip in the shortest form",
        arguments: [
            BluetoothUUID.heartRate, BluetoothUUID(uuid32: 0x0102_0304),
            BluetoothUUID(uuid128: 0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF),
        ]
    )
    func bytesRoundTrip(uuid: BluetoothUUID) throws {
        #expect(uuid.littleEndianBytes.count == uuid.bitWidth / 8)
        #expect(uuid.littleEndianBytes == uuid.bigEndianBytes.reversed())
        #expect(BluetoothUUID(littleEndianBytes: uuid.littleEndianBytes) == uuid)
        #expect(BluetoothUUID(bigEndianBytes: uuid.bigEndianBytes) == uuid)
    }

    @Test("Sixteen big-endian bytes read in the order the string form writes them")
    func bigEndianBytesFollowTheString() throws {
        let uuid = try #require(BluetoothUUID(bigEndianBytes: Array(0x00...0x0F)))
        #expect(uuid.uuidString == "00010203-0405-0607-0809-0a0b0c0d0e0f")
        #expect(BluetoothUUID(littleEndianBytes: Array((0x00...0x0F).reversed())) == uuid)
    }

    @Test("Little-endian bytes as advertising data carries them give the 16-bit UUID")
    func littleEndianSixteenBit() {
        #expect(BluetoothUUID(littleEndianBytes: [0x0D, 0x18]) == .heartRate)
        #expect(BluetoothUUID.heartRate.littleEndianBytes == [0x0D, 0x18])
        #expect(BluetoothUUID.heartRate.bigEndianBytes == [0x18, 0x0D])
    }

    @Test("Byte counts other than 2, 4 or 16 are rejected", arguments: [0, 1, 3, 5, 8, 15, 17])
    func wrongByteCountsAreRejected(count: Int) {
        let bytes = [UInt8](repeating: 0xAB, count: count)
        #expect(BluetoothUUID(littleEndianBytes: bytes) == nil)
        #expect(BluetoothUUID(bigEndianBytes: bytes) == nil)
    }

    @Test("A string literal makes a UUID")
    func stringLiteral() {
        let uuid: BluetoothUUID = "2a37"
        #expect(uuid == .heartRateMeasurement)
    }

    @Test("A string literal that is no UUID stops the program")
    func invalidLiteralTraps() async {
        await #expect(processExitsWith: .failure) {
            _ = BluetoothUUID(stringLiteral: "not-a-uuid")
        }
    }

    @Test("UUIDs sort by their 128-bit value")
    func ordering() {
        let uuids: [BluetoothUUID] = ["ffffffff-0000-0000-0000-000000000000", "2A00", "1800", "0001"]
        #expect(uuids.sorted().map(\.shortForm) == [0x0001, 0x1800, 0x2A00, nil])
    }

    @Test("A UUID encodes as its canonical string and decodes from any accepted form")
    func codable() throws {
        let encoded = try JSONEncoder().encode([BluetoothUUID.batteryLevel])
        #expect(String(decoding: encoded, as: UTF8.self) == #"["00002a19-0000-1000-8000-00805f9b34fb"]"#)
        let decoded = try JSONDecoder().decode([BluetoothUUID].self, from: Data(#"["2A19", "00002a19"]"#.utf8))
        #expect(decoded == [.batteryLevel, .batteryLevel])
    }

    @Test("Decoding text that is no UUID throws")
    func decodingGarbageThrows() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([BluetoothUUID].self, from: Data(#"["battery"]"#.utf8))
        }
    }

    @Test(
        "Well-known UUIDs carry their SIG-assigned numbers",
        arguments: [
            (BluetoothUUID.genericAccess, 0x1800), (.genericAttribute, 0x1801), (.deviceInformation, 0x180A),
            (.heartRate, 0x180D), (.batteryService, 0x180F), (.deviceName, 0x2A00), (.appearance, 0x2A01),
            (.serviceChanged, 0x2A05), (.batteryLevel, 0x2A19), (.heartRateMeasurement, 0x2A37),
            (.bodySensorLocation, 0x2A38), (.characteristicExtendedProperties, 0x2900),
            (.characteristicUserDescription, 0x2901), (.clientCharacteristicConfiguration, 0x2902),
            (.characteristicPresentationFormat, 0x2904),
        ] as [(BluetoothUUID, UInt32)]
    )
    func wellKnownNumbers(uuid: BluetoothUUID, number: UInt32) {
        #expect(uuid.shortForm == number)
    }
}
