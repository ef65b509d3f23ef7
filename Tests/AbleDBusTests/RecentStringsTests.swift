import Testing

@testable import AbleDBus

struct RecentStringsTests {
    /// The address of a string's UTF-8 storage: equal for the same stored string.
    private func storage(of string: String) -> UnsafePointer<UInt8>? {
        string.utf8.withContiguousStorageIfAvailable { $0.baseAddress }!
    }

    @Test func aRecentLongStringIsReusedAndAnotherWithItsLengthIsNot() {
        var strings = RecentStrings(capacity: 4)
        let first = "org.bluez.GattCharacteristic1".withCString { strings.bodyString($0) }
        let again = "org.bluez.GattCharacteristic1".withCString { strings.bodyString($0) }
        let other = "org.bluez.GattCharacteristic2".withCString { strings.bodyString($0) }
        #expect(first == "org.bluez.GattCharacteristic1")
        #expect(again == first)
        #expect(storage(of: again) == storage(of: first))
        #expect(other == "org.bluez.GattCharacteristic2")
    }

    @Test func shortStringsAndEmptyOnesComeBackAsTheyAre() {
        var strings = RecentStrings(capacity: 2)
        for text in ["", "LE", "device", "exactly15bytes!", "exactly16bytes!!", "é", ""] {
            #expect(text.withCString { strings.bodyString($0) } == text)
            #expect(text.withCString { strings.string($0) } == text)
        }
    }

    @Test func theOldestEntryMakesRoomForANewOne() {
        var strings = RecentStrings(capacity: 2)
        let names = ["/org/bluez/hci0/dev_00_AA_01_01_00_01", "/org/bluez/hci0/dev_00_AA_01_01_00_02"]
        let first = names[0].withCString { strings.bodyString($0) }
        _ = names[1].withCString { strings.bodyString($0) }
        #expect(storage(of: names[0].withCString { strings.bodyString($0) }) == storage(of: first))
        // A third string takes the oldest entry's place: the first is made anew afterwards.
        _ = "/org/bluez/hci0/dev_00_AA_01_01_00_03".withCString { strings.bodyString($0) }
        let remade = names[0].withCString { strings.bodyString($0) }
        #expect(remade == names[0])
        #expect(storage(of: remade) != storage(of: first))
    }
}
