import Testing

@testable import AbleBlueZ

/// The version Able reads from an adapter's `Modalias`, and the real tier from `bluetoothd --version`.
struct BlueZVersionTests {
    @Test(
        "A Modalias names the version in its device number",
        arguments: [("usb:v1D6Bp0246d0542", "5.66"), ("usb:v1D6Bp0246d0552", "5.82"), ("usb:v1D6Bp0246d0557", "5.87")]
    )
    func modalias(modalias: String, version: String) {
        #expect(BlueZVersion(modalias: modalias)?.description == version)
    }

    @Test func aModaliasThatIsNotBlueZsOwnIsNoVersion() {
        #expect(BlueZVersion(modalias: "usb:v1D6Bp0001d0542") == nil)
        #expect(BlueZVersion(modalias: "bluetooth:v000Fp1200d1436") == nil)
    }

    @Test func textReadsMajorDotMinor() {
        #expect(BlueZVersion("5.82") == BlueZVersion(5, 82))
        #expect(BlueZVersion("5.66")! < BlueZVersion("5.82")!)
        #expect(BlueZVersion("5.9")! < BlueZVersion("5.10")!)
        for text in ["5", "5.", ".82", "5.82.1", "five.82", ""] {
            #expect(BlueZVersion(text) == nil, "\(text)")
        }
    }
}
