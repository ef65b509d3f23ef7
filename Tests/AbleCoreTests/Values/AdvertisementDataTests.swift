import AbleCore
import Testing

struct AdvertisementDataTests {
    /// Parses hex text such as `"02 01 06"` into bytes.
    private static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    @Test("An nRF51 advertisement with name, appearance, flags and manufacturer data parses")
    func nordicBlinky() throws {
        // Captured from an nRF51 "LED_Blinky" peripheral (Nordic DevZone question 11970).
        let raw = Self.bytes(
            "0B 09 4C 45 44 5F 42 6C 69 6E 6B 79 03 19 00 00 02 01 06 0B FF DE EF FF 00 00 00 00 00 00 FF")
        #expect(raw.count == AdvertisementData.legacyMaximumLength)
        let data = try AdvertisementData(advertisingBytes: raw)
        #expect(data.localName == "LED_Blinky")
        #expect(data.appearance == 0x0000)
        #expect(data.flags == [.generalDiscoverable, .bredrNotSupported])
        #expect(data.manufacturerData == [0xEFDE: [0xFF, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xFF]])
        #expect(data.serviceUUIDs.isEmpty)
        #expect(data.txPowerLevel == nil)
    }

    @Test("An nRF beacon's manufacturer data parses whole")
    func nordicBeacon() throws {
        // Shown by nRF Connect for an nRF beacon (Nordic DevZone question 61025).
        let raw = Self.bytes(
            "02 01 04 1A FF 59 00 00 15 01 12 23 34 45 56 67 78 89 9A AB BC CD DE EF F0 FF FF FF FF C3")
        let data = try AdvertisementData(advertisingBytes: raw)
        #expect(data.flags == .bredrNotSupported)
        let payload = try #require(data.manufacturerData[0x0059])
        #expect(payload.count == 23)
        #expect(payload.prefix(2) == [0x00, 0x15])
        #expect(BluetoothUUID(bigEndianBytes: payload[2..<18])?.uuidString == "01122334-4556-6778-899a-abbccddeeff0")
        #expect(payload.last == 0xC3)
    }

    @Test("An Apple iBeacon advertisement parses")
    func iBeacon() throws {
        // The default iBeacon frame of an Epson TM-m30II printer, from its manual.
        let raw = Self.bytes(
            "02 01 06 1A FF 4C 00 02 15 FA C1 BA 2F 61 A2 4D 83 9A 8C 60 08 7C 23 25 69 00 00 00 00 BD"
        )
        let data = try AdvertisementData(advertisingBytes: raw)
        let payload = try #require(data.manufacturerData[0x004C])
        #expect(payload.count == 23)
        #expect(BluetoothUUID(bigEndianBytes: payload[2..<18])?.uuidString == "fac1ba2f-61a2-4d83-9a8c-60087c232569")
        #expect(Int8(bitPattern: payload[22]) == -67)
    }

    @Test("A sensor advertisement with manufacturer data and a name parses")
    func sensorWithName() throws {
        let raw = Self.bytes(
            "02 01 06 10 FF 10 78 03 E8 00 00 00 00 00 00 64 00 23 29 00 09 09 45 36 37 20 45 41 41 45")
        let data = try AdvertisementData(advertisingBytes: raw)
        #expect(data.localName == "E67 EAAE")
        #expect(data.manufacturerData[0x7810]?.count == 13)
    }

    @Test("An incomplete 16-bit service list parses, as the Adafruit Bluefruit guide builds it")
    func incompleteServiceList() throws {
        let data = try AdvertisementData(advertisingBytes: Self.bytes("02 01 06 05 02 0D 18 0A 18"))
        #expect(data.serviceUUIDs == [.heartRate, .deviceInformation])
    }

    @Test("Every kind of UUID list and service data parses")
    func uuidListsAndServiceData() throws {
        let custom: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
        // Joined rather than added with `+`: Swift 6.2's type checker gives up on the sum.
        let structures: [[UInt8]] = [
            [0x03, 0x03, 0x0F, 0x18],
            [0x05, 0x04, 0x04, 0x03, 0x02, 0x01],
            [0x11, 0x07], custom.littleEndianBytes,
            [0x05, 0x16, 0x0F, 0x18, 0x64, 0x01],
            [0x06, 0x20, 0x04, 0x03, 0x02, 0x01, 0xAA],
            [0x12, 0x21], custom.littleEndianBytes, [0x42],
            [0x02, 0x0A, 0xF4],
        ]
        let raw = Array(structures.joined())
        let data = try AdvertisementData(advertisingBytes: raw)
        #expect(data.serviceUUIDs == [.batteryService, BluetoothUUID(uuid32: 0x0102_0304), custom])
        #expect(
            data.serviceData == [
                .batteryService: [0x64, 0x01], BluetoothUUID(uuid32: 0x0102_0304): [0xAA], custom: [0x42],
            ]
        )
        #expect(data.txPowerLevel == -12)
    }

    @Test("A zero length ends the data, so padding and whatever follows it are ignored")
    func zeroLengthEndsParsing() throws {
        let raw: [UInt8] = [0x02, 0x01, 0x06, 0x00, 0xFF, 0x07, 0x13] + [UInt8](repeating: 0, count: 24)
        let data = try AdvertisementData(advertisingBytes: raw)
        #expect(data == AdvertisementData(flags: [.generalDiscoverable, .bredrNotSupported]))
    }

    @Test("Empty data is an empty advertisement")
    func emptyData() throws {
        #expect(try AdvertisementData(advertisingBytes: []) == AdvertisementData())
    }

    @Test("A complete local name wins over a shortened one in either order")
    func completeNameWins() throws {
        let short: [UInt8] = [0x03, 0x08, 0x41, 0x62]
        let complete: [UInt8] = [0x05, 0x09, 0x41, 0x62, 0x6C, 0x65]
        #expect(try AdvertisementData(advertisingBytes: short + complete).localName == "Able")
        #expect(try AdvertisementData(advertisingBytes: complete + short).localName == "Able")
        #expect(try AdvertisementData(advertisingBytes: short).localName == "Ab")
    }

    @Test("Unknown data types are skipped")
    func unknownTypesAreSkipped() throws {
        let raw: [UInt8] = [0x03, 0x2A, 0x01, 0x02, 0x02, 0x01, 0x06]
        #expect(try AdvertisementData(advertisingBytes: raw).flags == [.generalDiscoverable, .bredrNotSupported])
    }

    @Test(
        "Malformed data throws a protocol error",
        arguments: [
            [0x02],  // length without type
            [0x05, 0xFF, 0x4C, 0x00],  // structure runs past the end
            [0x02, 0x01, 0x06, 0x03, 0x09, 0x41],  // second structure truncated
            [0x04, 0x03, 0x0D, 0x18, 0x0A],  // 16-bit list with an odd byte
            [0x04, 0x05, 0x01, 0x02, 0x03],  // 32-bit list of three bytes
            [0x10, 0x07] + [UInt8](repeating: 0, count: 15),  // 128-bit list one byte short
            [0x03, 0x0A, 0x01, 0x02],  // TX power of two bytes
            [0x01, 0x0A],  // TX power without a value
            [0x02, 0x19, 0x01],  // appearance of one byte
            [0x02, 0xFF, 0x4C],  // manufacturer data without a full company identifier
            [0x02, 0x16, 0x0F],  // 16-bit service data without a full UUID
            [0x04, 0x20, 0x01, 0x02, 0x03],  // 32-bit service data without a full UUID
            [0x05, 0x21, 0x01, 0x02, 0x03, 0x04],  // 128-bit service data without a full UUID
        ] as [[UInt8]]
    )
    func malformedDataThrows(raw: [UInt8]) {
        #expect {
            try AdvertisementData(advertisingBytes: raw)
        } throws: { error in
            (error as? BluetoothError)?.code == .protocolError
        }
    }

    @Test(
        "Advertisement data round-trips through raw bytes",
        arguments: [
            AdvertisementData(),
            AdvertisementData(localName: "Able", serviceUUIDs: [.heartRate]),
            AdvertisementData(
                localName: "Sensor \u{00E9}",
                serviceUUIDs: [.heartRate, BluetoothUUID(uuid32: 0x0102_0304), "12E61727-B41A-436F-B64D-4777B35F2294"],
                manufacturerData: [0x004C: [1, 2, 3], 0x0059: []],
                serviceData: [.batteryService: [0x64], "ABDD3056-28FA-441D-A470-55A75A52553A": [9, 8]],
                txPowerLevel: -20,
                appearance: 0x0340,
                flags: [.generalDiscoverable, .bredrNotSupported]
            ),
            AdvertisementData(txPowerLevel: 127, flags: []),
            AdvertisementData(txPowerLevel: -127),
        ]
    )
    func roundTrip(data: AdvertisementData) throws {
        let raw = try data.advertisingBytes
        #expect(raw.count == data.encodedLength)
        #expect(try AdvertisementData(advertisingBytes: raw) == data)
    }

    @Test("Encoding writes structures in a fixed order with UUIDs in their shortest form")
    func encodingLayout() throws {
        let data = AdvertisementData(
            localName: "HR",
            serviceUUIDs: [.heartRate],
            manufacturerData: [0xFFFF: [0x01]],
            serviceData: [.batteryService: [0x64]],
            txPowerLevel: 0,
            appearance: 0x0341,
            flags: [.generalDiscoverable, .bredrNotSupported]
        )
        let expected: [UInt8] =
            [0x02, 0x01, 0x06, 0x03, 0x03, 0x0D, 0x18, 0x04, 0x16, 0x0F, 0x18, 0x64, 0x03, 0x19, 0x41, 0x03]
            + [0x02, 0x0A, 0x00, 0x04, 0xFF, 0xFF, 0xFF, 0x01, 0x03, 0x09, 0x48, 0x52]
        #expect(try data.advertisingBytes == expected)
        #expect(data.encodedLength == 28)
    }

    @Test("The encoded length tells whether data fits a legacy advertisement")
    func legacyLimit() throws {
        let fits = AdvertisementData(localName: String(repeating: "a", count: 29))
        let tooLong = AdvertisementData(localName: String(repeating: "a", count: 30))
        #expect(fits.encodedLength == AdvertisementData.legacyMaximumLength)
        #expect(tooLong.encodedLength == AdvertisementData.legacyMaximumLength + 1)
        #expect(try tooLong.advertisingBytes.count == 32)
    }

    @Test("A structure too large for its length byte cannot be encoded")
    func oversizedStructureThrows() {
        let data = AdvertisementData(manufacturerData: [0x004C: [UInt8](repeating: 0, count: 253)])
        #expect {
            try data.advertisingBytes
        } throws: { error in
            (error as? BluetoothError)?.code == .valueTooLong
        }
        let largest = AdvertisementData(manufacturerData: [0x004C: [UInt8](repeating: 0, count: 252)])
        #expect(throws: Never.self) { try largest.advertisingBytes }
    }

    @Test("A TX power level outside a signed byte cannot be encoded", arguments: [128, -128, 1000])
    func txPowerOutOfRangeThrows(level: Int) {
        #expect {
            try AdvertisementData(txPowerLevel: level).advertisingBytes
        } throws: { error in
            (error as? BluetoothError)?.code == .invalidArguments
        }
    }

    @Test("Flags have the Core Specification Supplement's bits")
    func flagBits() {
        #expect(AdvertisementData.Flags.limitedDiscoverable.rawValue == 0x01)
        #expect(AdvertisementData.Flags.generalDiscoverable.rawValue == 0x02)
        #expect(AdvertisementData.Flags.bredrNotSupported.rawValue == 0x04)
        #expect(AdvertisementData.Flags.simultaneousLEAndBREDRController.rawValue == 0x08)
        #expect(AdvertisementData.Flags.simultaneousLEAndBREDRHost.rawValue == 0x10)
    }
}
