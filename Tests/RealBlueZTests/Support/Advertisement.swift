import AbleDBus
import Testing

/// An `org.bluez.LEAdvertisement1` object that this process exports for `bluetoothd` to read.
///
/// Only BlueZ may call it: `bluetoothd` reads its properties while it handles
/// `RegisterAdvertisement`, and calls `Release` when it drops the advertisement on its own.
struct Advertisement: Sendable {
    var path: DBusObjectPath
    var serviceUUIDs: [String]
    /// Keep it short: legacy advertising data holds 31 bytes, and a 128-bit UUID takes 18 of them.
    var localName: String

    /// The exported interface: a connectable, discoverable advertisement of `serviceUUIDs`.
    var interface: DBusInterface {
        DBusInterface(
            BlueZ.leAdvertisement1,
            methods: [
                // BlueZ 5.66 calls it only when it drops the advertisement itself, not after
                // UnregisterAdvertisement; nothing is left to clean up here.
                .immediate("Release") { _ in [] }
            ],
            properties: [
                .constant("Type", "peripheral"),
                .constant("ServiceUUIDs", serviceUUIDs),
                .constant("LocalName", localName),
                // Without it the AD has no LE General Discoverable flag (see Tests/README.md).
                .constant("Discoverable", true),
            ])
    }
}

extension DBusConnection {
    /// Exports `advertisement`, callable by `bluezOwner` only, registers it on `adapter`, runs
    /// `body`, then unregisters and unexports it whatever happens.
    ///
    /// The corresponding BlueZ methods are `org.bluez.LEAdvertisingManager1.RegisterAdvertisement`
    /// and `UnregisterAdvertisement`.
    nonisolated func withAdvertisement<T>(
        _ advertisement: Advertisement, on adapter: String, bluezOwner: String, _ body: () async throws -> T
    ) async throws -> T {
        let manager = BlueZ.adapterPath(adapter)
        let path = advertisement.path
        try await export([advertisement.interface], at: path) { $0 == bluezOwner }
        do {
            // bluetoothd reads the properties back from this connection before it answers.
            try await callBlueZ(
                manager, BlueZ.leAdvertisingManager1, "RegisterAdvertisement",
                [.objectPath(path), [String: DBusVariant]().dbusValue])
        } catch {
            await unexport(path)
            throw error
        }
        return try await withCleanup(body) {
            do {
                try await self.callBlueZ(
                    manager, BlueZ.leAdvertisingManager1, "UnregisterAdvertisement", [.objectPath(path)])
            } catch {
                Issue.record(error, "could not unregister the advertisement \(path)")
            }
            await self.unexport(path)
        }
    }
}
