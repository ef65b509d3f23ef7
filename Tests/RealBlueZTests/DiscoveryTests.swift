import AbleDBus
import Foundation
import Testing

extension RealBlueZ {
    @Suite(.timeLimit(.minutes(2)))
    struct Discovery {
        @Test func theCentralDiscoversThePeripheralAdvertisingAServiceUUID() async throws {
            try await withSystemBus { bus in
                let bluezOwner = try #require(try await bus.nameOwner(of: BlueZ.service), "org.bluez has no owner")
                let central = BlueZ.adapterPath(Guest.central)
                let peripheralAddress = try await bus.bluezProperty(
                    "Address", of: BlueZ.adapter1, at: BlueZ.adapterPath(Guest.peripheral), as: String.self)
                let uuid = UUID().uuidString.lowercased()
                let advertisement = Advertisement(
                    path: "/org/able/tests/advertisement0", serviceUUIDs: [uuid], localName: "able")
                let filter: [String: DBusVariant] = ["Transport": DBusVariant("le"), "UUIDs": DBusVariant([uuid])]
                let signals = try await bus.bluezSignals()

                // Scan before advertising: the emulated controllers send one report per
                // advertising enable, and the kernel drops a report that comes before the scan.
                try await withCleanup {
                    try await bus.withDiscovery(on: Guest.central, filter: filter) {
                        try await bus.withAdvertisement(advertisement, on: Guest.peripheral, bluezOwner: bluezOwner) {
                            let found = "a device \(peripheralAddress) on \(Guest.central) advertising \(uuid)"
                            let before = try await bus.bluezObjects()
                            let tree = try await before.waiting(for: found, timeout: .seconds(30), signals: signals) {
                                $0.devices(of: central, address: peripheralAddress).values.contains { device in
                                    (try? device.decode("UUIDs", as: [String].self))?.contains(uuid) == true
                                }
                            }
                            let device = try #require(
                                tree.devices(of: central, address: peripheralAddress).first?.value)
                            #expect(try device.decode("Adapter", as: DBusObjectPath.self) == central)
                            #expect(try device.decode("Name", as: String.self) == advertisement.localName)

                            // BlueZ could read the advertisement; another caller may not.
                            let refusal = await #expect(throws: DBusError.self) {
                                try await bus.call(
                                    destination: bus.uniqueName, path: advertisement.path,
                                    interface: BlueZ.properties, method: "GetAll",
                                    arguments: [.string(BlueZ.leAdvertisement1)])
                            }
                            #expect(refusal?.name == .accessDenied)
                        }
                    }
                } cleanup: {
                    // Leave no device behind for the tests that follow.
                    await bus.removeDevices(of: Guest.central, address: peripheralAddress)
                }
            }
        }
    }
}
