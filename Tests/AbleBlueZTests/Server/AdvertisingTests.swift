import Able
import AbleDBus
import AbleTestSupport
import Testing

@testable import AbleBlueZ

@Suite(.timeLimit(.minutes(1)))
struct AdvertisingTests {
    func withAdapter(_ body: (FakeBlueZ, Adapter) async throws -> Void) async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        try await body(fake, Adapter(backend: try await BlueZAdapterBackend.open(name: "hci1", system: system)))
    }

    @Test func anAdvertisementIsRegisteredWithItsPropertiesAndStops() async throws {
        try await withAdapter { fake, adapter in
            let set = try await adapter.startAdvertising(
                Advertisement(
                    localName: "able", serviceUUIDs: [.heartRate], manufacturerData: [0xFFFF: [1, 2]],
                    appearance: 0x0341,
                    timeout: .seconds(30)))
            let registered = try #require(fake.advertisement.value)
            #expect(try registered.properties.decode("Type", as: String.self) == "peripheral")
            #expect(try registered.properties.decode("LocalName", as: String.self) == "able")
            #expect(
                try registered.properties.decode("ServiceUUIDs", as: [String].self) == [
                    BluetoothUUID.heartRate.uuidString
                ])
            #expect(try registered.properties.decode("Appearance", as: UInt16.self) == 0x0341)
            #expect(try registered.properties.decode("Timeout", as: UInt16.self) == 30)
            #expect(try registered.properties.decode("Discoverable", as: Bool.self) == true)
            #expect(await set.isActive)
            await set.stop()
            #expect(fake.advertisement.value == nil)
            #expect(await !set.isActive)
        }
    }

    @Test func advertisingCancelledBeforeBlueZAnswersIsUnregistered() async throws {
        try await withAdapter { fake, adapter in
            fake.replyDelay.value = .seconds(2)
            let starting = Task { try await adapter.startAdvertising(Advertisement(localName: "able")) }
            try await waitUntil { fake.advertisement.value != nil }
            starting.cancel()
            await #expect(throws: CancellationError.self) { _ = try await starting.value }
            #expect(fake.advertisement.value == nil)
        }
    }

    @Test func releaseByBlueZIsNoticed() async throws {
        try await withAdapter { fake, adapter in
            let set = try await adapter.startAdvertising(Advertisement(localName: "able"))
            let registered = try #require(fake.advertisement.value)
            _ = try await fake.connection.call(
                destination: registered.owner, path: registered.path, interface: "org.bluez.LEAdvertisement1",
                method: "Release")
            // BlueZ stays: after the grace a stopping bluetoothd would have taken, the set has ended.
            try await waitUntil { await !set.isActive }
            await set.stop()
        }
    }

    @Test func aDataUpdateChangesTheExportedPropertiesAndAParameterUpdateRegistersAgain() async throws {
        try await withAdapter { fake, adapter in
            let set = try await adapter.startAdvertising(Advertisement(manufacturerData: [0xFFFF: [1]]))
            let first = try #require(fake.advertisement.value)
            let changes = try await fake.connection.signals(
                matching:
                    DBusMatchRule(
                        sender: first.owner, path: first.path, interface: "org.freedesktop.DBus.Properties",
                        member: "PropertiesChanged"))
            try await set.update(Advertisement(manufacturerData: [0xFFFF: [2]]))
            var iterator = changes.makeAsyncIterator()
            let signal = try #require(await iterator.next())
            let changed = try signal.arguments[1].decode([String: DBusVariant].self)
            #expect(Array(changed.keys) == ["ManufacturerData"])
            let reply = try await fake.connection.call(
                destination: first.owner, path: first.path, interface: "org.freedesktop.DBus.Properties",
                method: "Get", arguments: [.string("org.bluez.LEAdvertisement1"), .string("ManufacturerData")])
            let value = try reply[0].decode(DBusVariant.self).decode([UInt16: DBusVariant].self)
            #expect(try value[0xFFFF]?.decode([UInt8].self) == [2])
            #expect(fake.advertisement.value?.path == first.path)
            try await set.update(Advertisement(manufacturerData: [0xFFFF: [3]], timeout: .seconds(9)))
            let second = try #require(fake.advertisement.value)
            #expect(second.path != first.path)
            #expect(try second.properties.decode("Timeout", as: UInt16.self) == 9)
            #expect(await set.isActive)
            await set.stop()
            #expect(fake.advertisement.value == nil)
        }
    }

    @Test func capabilitiesComeFromTheAdvertisingManagersProperties() async throws {
        try await withAdapter { _, adapter in
            let capabilities = try await adapter.advertisingCapabilities()
            #expect(capabilities.availableInstances == 5)
            #expect(capabilities.maximumAdvertisingDataLength == 31)
            #expect(capabilities.includes == [.txPower, .appearance, .localName])
            #expect(capabilities.secondaryChannels.isEmpty)
            #expect(!capabilities.supportsParameters)
            #expect(!capabilities.supportsScanResponseData)
        }
        // BlueZ 5.82 with -E on an extended-advertising controller.
        let capabilities = BlueZAdapterBackend.capabilities(
            manager: [
                "SupportedInstances": DBusVariant(UInt8(3)), "ActiveInstances": DBusVariant(UInt8(1)),
                "SupportedSecondaryChannels": DBusVariant(["1M", "2M"]),
                "SupportedFeatures": DBusVariant(["CanSetTxPower"]),
                "SupportedCapabilities": DBusVariant([
                    "MaxAdvLen": DBusVariant(UInt8(251)), "MaxScnRspLen": DBusVariant(UInt8(251)),
                    "MinTxPower": DBusVariant(Int16(-34)), "MaxTxPower": DBusVariant(Int16(10)),
                ]),
            ],
            monitorManager: ["SupportedMonitorTypes": DBusVariant(["or_patterns"])],
            adapter: ["Manufacturer": DBusVariant(UInt16(2))])
        #expect(
            capabilities
                == AdvertisingCapabilities(
                    availableInstances: 3, activeInstances: 1, maximumAdvertisingDataLength: 251,
                    maximumScanResponseLength: 251, txPowerRange: -34...10, includes: [],
                    secondaryChannels: [.le1M, .le2M], canSetTxPower: true, supportsParameters: true,
                    supportsScanResponseData: true, extendsAutomatically: true))
    }

    @Test func dataTooLongForLegacyAdvertisingIsRefusedBeforeBlueZSeesIt() async throws {
        try await withAdapter { fake, adapter in
            let advertisement = Advertisement(
                serviceUUIDs: ["12E61727-B41A-436F-B64D-4777B35F2294"],
                manufacturerData: [0xFFFF: [1, 2, 3, 4, 5, 6, 7]])
            #expect(advertisement.layout.advertisingDataLength == 3 + 18 + 11)
            let error = await #expect(throws: BluetoothError.self) { try await adapter.startAdvertising(advertisement) }
            #expect(error?.code == .valueTooLong)
            #expect(error?.message.contains("needs 32 bytes; 31 are available") == true)
            #expect(fake.advertisement.value == nil)
        }
    }

    @Test func noFreeInstanceIsExplained() async throws {
        try await withAdapter { _, adapter in
            let error = await #expect(throws: BluetoothError.self) {
                try await adapter.startAdvertising(Advertisement(localName: "refuse"))
            }
            #expect(error?.code == .notAvailable)
            #expect(error?.message.contains("no free advertising instance") == true)
        }
    }
}
