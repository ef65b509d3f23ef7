import Able
import AbleDBus
import Testing

@testable import AbleBlueZ

/// A device's GATT database is built from BlueZ's objects once per change of its attributes, not
/// on every lookup: these tests check what the build makes of the objects, and which changes
/// make the tree forget what it built.
struct GATTDatabaseTests {
    let device: DBusObjectPath = "/org/bluez/hci0/dev_00_11_22_33_44_55"
    let other: DBusObjectPath = "/org/bluez/hci0/dev_66_77_88_99_AA_BB"

    func service(_ uuid: String, of device: DBusObjectPath) -> BlueZObjectTree.Interfaces {
        [
            "org.bluez.GattService1": [
                "UUID": DBusVariant(.string(uuid)), "Device": DBusVariant(.objectPath(device)),
                "Primary": DBusVariant(.boolean(true)),
            ]
        ]
    }

    func characteristic(_ uuid: String, of service: DBusObjectPath, flags: [String] = ["read"])
        -> BlueZObjectTree.Interfaces
    {
        [
            "org.bluez.GattCharacteristic1": [
                "UUID": DBusVariant(.string(uuid)), "Service": DBusVariant(.objectPath(service)),
                "Flags": DBusVariant(flags),
            ]
        ]
    }

    func descriptor(_ uuid: String, of characteristic: DBusObjectPath) -> BlueZObjectTree.Interfaces {
        [
            "org.bluez.GattDescriptor1": [
                "UUID": DBusVariant(.string(uuid)), "Characteristic": DBusVariant(.objectPath(characteristic)),
            ]
        ]
    }

    func path(_ base: DBusObjectPath, _ component: String) -> DBusObjectPath { base.appending(component)! }

    @Test func theBuildNestsEachAttributeUnderItsParentInTheOrderOfTheirHandles() throws {
        let service1 = path(device, "service0001")
        let service2 = path(device, "service0010")
        let char2 = path(service1, "char0005")
        let char1 = path(service1, "char0002")
        let otherService = path(other, "service0001")
        let objects: [DBusObjectPath: BlueZObjectTree.Interfaces] = [
            service2: service("0000180f-0000-1000-8000-00805f9b34fb", of: device),
            service1: service("0000180a-0000-1000-8000-00805f9b34fb", of: device),
            char2: characteristic("00002a29-0000-1000-8000-00805f9b34fb", of: service1, flags: ["notify"]),
            char1: characteristic("00002a24-0000-1000-8000-00805f9b34fb", of: service1),
            path(char2, "desc0007"): descriptor("00002902-0000-1000-8000-00805f9b34fb", of: char2),
            // Another device's attributes, and a characteristic whose service is not there.
            otherService: service("0000180d-0000-1000-8000-00805f9b34fb", of: other),
            path(otherService, "char0003"): characteristic("00002a37-0000-1000-8000-00805f9b34fb", of: otherService),
            path(device, "service0020/char0021"): characteristic(
                "00002a19-0000-1000-8000-00805f9b34fb", of: path(device, "service0020")),
        ]
        let services = BlueZPeripheralBackend.gattDatabase(of: device, in: objects)
        #expect(services.map(\.uuid) == [BluetoothUUID(uuid16: 0x180A), BluetoothUUID(uuid16: 0x180F)])
        #expect(
            services[0].characteristics.map(\.uuid) == [BluetoothUUID(uuid16: 0x2A24), BluetoothUUID(uuid16: 0x2A29)])
        #expect(services[0].characteristics[1].properties.contains(.notify))
        #expect(services[0].characteristics[1].descriptors.map(\.uuid) == [BluetoothUUID(uuid16: 0x2902)])
        #expect(services[0].characteristics[1].id == RemoteAttributeID(path: char2, device: device))
        #expect(services[1].characteristics.isEmpty)
    }

    @Test func addingOrRemovingAnAttributeForgetsTheBuiltDatabases() {
        var state = BlueZObjectTree.State()
        let service1 = path(device, "service0001")
        state.gattDatabases[device] = []
        _ = state.apply(.interfacesAdded(service1, service("0000180a-0000-1000-8000-00805f9b34fb", of: device)))
        #expect(state.gattDatabases.isEmpty)
        #expect(state.gattVersion == 1)

        state.gattDatabases[device] = []
        _ = state.apply(.interfacesRemoved(service1, ["org.bluez.GattService1"]))
        #expect(state.gattDatabases.isEmpty)
        #expect(state.gattVersion == 2)
    }

    @Test func aChangedValueKeepsTheBuiltDatabasesAndAChangedFlagDoesNot() {
        var state = BlueZObjectTree.State()
        let service1 = path(device, "service0001")
        let char1 = path(service1, "char0002")
        _ = state.apply(.interfacesAdded(char1, characteristic("00002a24-0000-1000-8000-00805f9b34fb", of: service1)))
        let version = state.gattVersion
        state.gattDatabases[device] = []
        for (changed, invalidated) in [
            (["Value": DBusVariant(.bytes([1])), "Notifying": DBusVariant(.boolean(true))], [String]()),
            ([:], ["Value"]),
        ] {
            _ = state.apply(
                .propertiesChanged(
                    char1, interface: "org.bluez.GattCharacteristic1", changed: changed, invalidated: invalidated))
        }
        // Nor does a device's own change, or an interface of another kind.
        _ = state.apply(.interfacesAdded(device, ["org.bluez.Device1": ["Connected": DBusVariant(.boolean(true))]]))
        _ = state.apply(
            .propertiesChanged(
                device, interface: "org.bluez.Device1", changed: ["Connected": DBusVariant(.boolean(false))],
                invalidated: []))
        #expect(state.gattVersion == version)
        #expect(state.gattDatabases[device] != nil)

        _ = state.apply(
            .propertiesChanged(
                char1, interface: "org.bluez.GattCharacteristic1",
                changed: ["Flags": DBusVariant(["notify"])], invalidated: []))
        #expect(state.gattVersion == version + 1)
        #expect(state.gattDatabases.isEmpty)
    }
}
