import AbleCore
import Testing

/// `Hex.format`: a fixed number of digits, whatever the value's width; `Hex.string`: two per byte.
struct HexTests {
    @Test(
        "Values are zero-padded to the digits asked for, and their higher digits dropped",
        arguments: [
            (UInt64(0x0B), 4, false, "000b"), (UInt64(0xABCD), 4, false, "abcd"), (UInt64(0x1_2345), 4, false, "2345"),
            (UInt64(0xFF), 2, true, "FF"), (UInt64(0), 0, false, ""), (UInt64.max, 16, false, "ffffffffffffffff"),
            (UInt64(0x1F), 1, true, "F"),
        ] as [(UInt64, Int, Bool, String)]
    )
    func fixedDigits(value: UInt64, digits: Int, uppercase: Bool, text: String) {
        #expect(Hex.format(value, digits: digits, uppercase: uppercase) == text)
    }

    @Test func narrowAndWideIntegersFormatAlike() {
        #expect(Hex.format(UInt8(0x0A), digits: 4) == "000a")
        #expect(Hex.format(UInt16(0xBEEF), digits: 4, uppercase: true) == "BEEF")
        let wide = UInt128(0x0123_4567_89AB_CDEF) << 64 | UInt128(0xFEDC_BA98_7654_3210)
        #expect(Hex.format(wide, digits: 32) == "0123456789abcdeffedcba9876543210")
        #expect(Hex.format(wide, digits: 20) == "cdeffedcba9876543210")
    }

    @Test func bytesAreTwoLowercaseDigitsEachWithNoSeparator() {
        #expect(Hex.string([UInt8]()) == "")
        #expect(Hex.string([0x00, 0x0F, 0xA0, 0xFF]) == "000fa0ff")
        // Every byte value, against the fixed-width formatter.
        let every = (0...255).map(UInt8.init)
        #expect(Hex.string(every) == every.map { Hex.format($0, digits: 2) }.joined())
        #expect(Hex.string(every[16..<18]) == "1011")
    }
}
