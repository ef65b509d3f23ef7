import AbleCore
import AbleDBus
import Testing

@testable import AbleBlueZ

struct RemoteAttributeIDTests {
    let device: DBusObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_01"

    @Test(
        "A GATT object's identity is its chain of handles, and gives its path back",
        arguments: [
            ("/service000a", [0x000A]), ("/service000a/char000b", [0x000A, 0x000B]),
            ("/service0010/char0011/desc0013", [0x0010, 0x0011, 0x0013]), ("/serviceffff/charabcd", [0xFFFF, 0xABCD]),
        ] as [(String, [UInt16])]
    )
    func roundTrip(suffix: String, handles: [UInt16]) throws {
        let path = try #require(DBusObjectPath(rawValue: device.rawValue + suffix))
        let id = try #require(RemoteAttributeID(path: path, device: device))
        #expect(id.components == handles)
        #expect(id.path(device: device) == path)
    }

    @Test(
        "Objects that are not the device's GATT objects have no identity",
        arguments: [
            "/org/bluez/hci0/dev_00_AA_01_01_00_01", "/org/bluez/hci0/dev_00_AA_01_01_00_02/service000a",
            "/org/bluez/hci0/dev_00_AA_01_01_00_01/char000a", "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0a",
            "/org/bluez/hci0/dev_00_AA_01_01_00_01/servicexyzw",
            "/org/bluez/hci0/dev_00_AA_01_01_00_01/service000a/char000b/desc000c/desc000d",
            // Found by Scripts/fuzz (FuzzValues): BlueZ prints lowercase digits, and an uppercase
            // spelling parsed to an identity whose path was another object's.
            "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001/charD002",
            "/org/bluez/hci0/dev_00_AA_01_01_00_01/serviceABCD",
        ]
    )
    func foreignPaths(path: String) throws {
        let path = try #require(DBusObjectPath(rawValue: path))
        #expect(RemoteAttributeID(path: path, device: device) == nil)
    }
}
