import AbleDBus
import Testing

@testable import AbleBlueZ

/// The object tree applies signals on the event loop as they arrive, and the replies of its own
/// reads (`GetManagedObjects` when bluetoothd appears, `GetAll` on a refresh) later, on the task
/// that asked. These tests interleave the two as the event loop can, and check that a reply never
/// brings back or overwrites what a later signal removed or set.
struct ObjectTreeStateTests {
    let device: DBusObjectPath = "/org/bluez/hci0/dev_00_11_22_33_44_55"
    let other: DBusObjectPath = "/org/bluez/hci0/dev_66_77_88_99_AA_BB"
    let device1 = "org.bluez.Device1"

    func deviceInterfaces(connected: Bool, name: String = "old") -> BlueZObjectTree.Interfaces {
        [device1: ["Connected": DBusVariant(.boolean(connected)), "Name": DBusVariant(.string(name))]]
    }

    @Test func aSnapshotDoesNotBringBackAnObjectRemovedAfterItWasAskedFor() {
        var state = BlueZObjectTree.State()
        let since = state.beginRead()
        // bluetoothd answers with the device, then removes it; the loop applies the removal first.
        _ = state.apply(.interfacesRemoved(device, [device1]))
        let applied = state.applyLoad(
            [device: deviceInterfaces(connected: true), other: deviceInterfaces(connected: false)], after: since)
        state.endRead()
        #expect(state.objects[device] == nil)
        #expect(state.objects[other] != nil)
        #expect(applied.map(\.path) == [other])
    }

    @Test func aSnapshotKeepsThePropertiesALaterSignalSetAndTakesTheRest() {
        var state = BlueZObjectTree.State()
        _ = state.apply(.interfacesAdded(device, deviceInterfaces(connected: true)))
        let since = state.beginRead()
        _ = state.apply(
            .propertiesChanged(
                device, interface: device1, changed: ["Connected": DBusVariant(.boolean(false))], invalidated: []))
        _ = state.applyLoad([device: deviceInterfaces(connected: true, name: "new")], after: since)
        state.endRead()
        #expect(state.objects[device]?[device1]?["Connected"] == DBusVariant(.boolean(false)))
        #expect(state.objects[device]?[device1]?["Name"] == DBusVariant(.string("new")))
    }

    @Test func aSnapshotBringsBackWhatWasRemovedBeforeItWasAskedFor() {
        var state = BlueZObjectTree.State()
        _ = state.apply(.interfacesAdded(device, deviceInterfaces(connected: true)))
        _ = state.beginRead()
        _ = state.apply(.interfacesRemoved(device, [device1]))
        state.endRead()
        // A later read sees the device again (bluetoothd added it back): it is applied.
        let since = state.beginRead()
        _ = state.applyLoad([device: deviceInterfaces(connected: true)], after: since)
        state.endRead()
        #expect(state.objects[device]?[device1]?["Connected"] == DBusVariant(.boolean(true)))
    }

    @Test func removalsAreRememberedOnlyWhileAReadIsInFlight() {
        var state = BlueZObjectTree.State()
        _ = state.apply(.interfacesAdded(device, deviceInterfaces(connected: true)))
        _ = state.apply(.interfacesRemoved(device, [device1]))
        #expect(state.removedDuringReads.isEmpty)
        _ = state.beginRead()
        _ = state.beginRead()
        _ = state.apply(.interfacesAdded(other, deviceInterfaces(connected: true)))
        _ = state.apply(.interfacesRemoved(other, [device1]))
        state.endRead()
        #expect(state.removedDuringReads[other] != nil)
        state.endRead()
        #expect(state.removedDuringReads.isEmpty)
        #expect(state.lastSet.isEmpty)
    }

    @Test func aRefreshKeepsThePropertiesALaterSignalSet() {
        var state = BlueZObjectTree.State()
        _ = state.apply(.interfacesAdded(device, deviceInterfaces(connected: false)))
        let since = state.beginRead()
        _ = state.apply(
            .propertiesChanged(
                device, interface: device1, changed: ["Connected": DBusVariant(.boolean(true))], invalidated: []))
        _ = state.applyRead(
            ["Connected": DBusVariant(.boolean(false)), "Name": DBusVariant(.string("new"))], of: device1, at: device,
            after: since)
        state.endRead()
        #expect(state.objects[device]?[device1]?["Connected"] == DBusVariant(.boolean(true)))
        #expect(state.objects[device]?[device1]?["Name"] == DBusVariant(.string("new")))
    }
}
