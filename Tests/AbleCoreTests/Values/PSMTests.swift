import AbleCore
import Testing

struct PSMTests {
    @Test(
        "A PSM knows whether it is SIG-assigned or dynamic",
        arguments: [
            (0x0000, false, false), (0x0001, true, false), (0x0023, true, false), (0x007F, true, false),
            (0x0080, false, true), (0x00C1, false, true), (0x00FF, false, true), (0x0100, false, false),
            (0x1001, false, false),
        ] as [(UInt16, Bool, Bool)]
    )
    func ranges(value: UInt16, isFixed: Bool, isDynamic: Bool) {
        let psm = PSM(rawValue: value)
        #expect(psm.isFixed == isFixed)
        #expect(psm.isDynamic == isDynamic)
    }

    @Test("A PSM travels as two little-endian bytes", arguments: [0x0000, 0x0080, 0x00C1, 0x1234, 0xFFFF] as [UInt16])
    func bytesRoundTrip(value: UInt16) throws {
        let psm = PSM(rawValue: value)
        #expect(psm.bytes == [UInt8(value & 0xFF), UInt8(value >> 8)])
        #expect(PSM(bytes: psm.bytes) == psm)
    }

    @Test("The bytes of dynamic PSM 0x0081 are 0x81 then 0x00")
    func bytesOrder() {
        #expect(PSM(rawValue: 0x0081).bytes == [0x81, 0x00])
        #expect(PSM(bytes: [0x81, 0x00]) == PSM(rawValue: 0x0081))
    }

    @Test("Byte counts other than two are rejected", arguments: [0, 1, 3])
    func wrongByteCounts(count: Int) {
        #expect(PSM(bytes: [UInt8](repeating: 0x80, count: count)) == nil)
    }

    @Test("Automatic asks for PSM 0 and says so")
    func automatic() {
        #expect(PSM.automatic.rawValue == 0)
        #expect(!PSM.automatic.isFixed && !PSM.automatic.isDynamic)
        #expect(PSM.automatic.description == "PSM automatic")
    }

    @Test("Well-known PSMs carry their assigned values")
    func wellKnown() {
        #expect(PSM.ipsp.rawValue == 0x0023)
        #expect(PSM.eatt.rawValue == 0x0027)
    }

    @Test("A PSM describes itself in hex")
    func description() {
        #expect(PSM(rawValue: 0x0080).description == "PSM 0x0080")
        #expect(PSM(rawValue: 0x00AB).description == "PSM 0x00AB")
    }

    @Test("PSMs sort by value")
    func ordering() {
        #expect([PSM(rawValue: 0x90), .eatt, .automatic].sorted() == [.automatic, .eatt, PSM(rawValue: 0x90)])
    }
}
