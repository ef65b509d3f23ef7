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
            #expect(await !set.isActive)
            await set.stop()
        }
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
