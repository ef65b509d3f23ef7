import Able
import AbleDBus
import Testing

@testable import AbleBlueZ

struct BlueZPathComponentTests {
    @Test("The BlueZ object path component round-trips")
    func bluezPathComponent() throws {
        let address: BluetoothAddress = "00:AA:01:01:00:01"
        #expect(address.bluezPathComponent == "dev_00_AA_01_01_00_01")
        #expect(BluetoothAddress(bluezPathComponent: "dev_00_AA_01_01_00_01") == address)
        #expect(BluetoothAddress(bluezPathComponent: "dev_00_aa_01_01_00_01") == address)
        let path = "/org/bluez/hci0/dev_00_AA_01_01_00_01"
        #expect(BluetoothAddress(bluezPathComponent: try #require(path.split(separator: "/").last)) == address)
    }

    @Test("A device's object path gives its address; other objects' paths give none")
    func devicePaths() {
        let address: BluetoothAddress = "00:AA:01:01:00:01"
        #expect(BluetoothAddress(bluezDevicePath: "/org/bluez/hci0/dev_00_AA_01_01_00_01") == address)
        #expect(BluetoothAddress(bluezDevicePath: "/dev_00_AA_01_01_00_01") == address)
        #expect(BluetoothAddress(bluezDevicePath: "/org/bluez/hci0") == nil)
        #expect(BluetoothAddress(bluezDevicePath: "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0010") == nil)
        #expect(BluetoothAddress(bluezDevicePath: "/") == nil)
        // The form the GATT server reads in place from a request's options agrees on each.
        for path in [
            "/org/bluez/hci0/dev_00_AA_01_01_00_01", "/dev_00_AA_01_01_00_01", "/org/bluez/hci0",
            "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0010", "/", "dev_00_AA_01_01_00_01",
        ] {
            let inPlace = Array(path.utf8).withUnsafeBufferPointer { BluetoothAddress(bluezDevicePathUTF8: $0) }
            #expect(inPlace == DBusObjectPath(rawValue: path).flatMap { BluetoothAddress(bluezDevicePath: $0) })
        }
    }

    @Test(
        "Components that are not BlueZ device names are rejected",
        arguments: [
            "00_AA_01_01_00_01", "dev_00:AA:01:01:00:01", "dev_00_AA_01_01_00", "hci0", "dev_", "service0010",
            "dev_00_AA_01_01_00_0G", "dev_00_AA_01_01_00_é", "dev_00_AA_01_01_00_01_",
        ]
    )
    func malformedPathComponentsAreRejected(component: String) {
        #expect(BluetoothAddress(bluezPathComponent: component) == nil)
    }
}
