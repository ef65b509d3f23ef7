import Able
import AbleDBus
import AbleTestSupport
import Testing

@testable import AbleBlueZ

@Suite(.timeLimit(.minutes(1)))
struct ScanTests {
    static let heartRate = "0000180d-0000-1000-8000-00805f9b34fb"
    static let battery = "0000180f-0000-1000-8000-00805f9b34fb"

    func withScanningAdapter(_ body: (FakeBlueZ, Adapter) async throws -> Void) async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let adapter = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci0", system: system))
        try await body(fake, adapter)
    }

    @Test func aServiceFilterDeliversOnlyMatchingDevicesEachOnce() async throws {
        try await withScanningAdapter { fake, adapter in
            let scan = try await adapter.scan(ScanFilter(serviceUUIDs: [BluetoothUUID(Self.heartRate)!]))
            #expect(fake.discoveryCalls.value == ["SetDiscoveryFilter", "StartDiscovery"])
            #expect(try fake.discoveryFilter.value.decode("Transport", as: String.self) == "le")
            #expect(try fake.discoveryFilter.value.decode("UUIDs", as: [String].self) == [Self.heartRate])
            try await fake.addDevice("00:11:22:33:44:01", name: "battery", uuids: [Self.battery])
            try await fake.addDevice("00:11:22:33:44:02", name: "heart", uuids: [Self.heartRate], rssi: -40)
            fake.report("00:11:22:33:44:02", rssi: -41)
            try await fake.addDevice("00:11:22:33:44:03", name: "heart2", uuids: [Self.heartRate])
            var found: [String] = []
            for try await discovery in scan {
                found.append(discovery.name ?? "?")
                if found.count == 2 { break }
            }
            #expect(found == ["heart", "heart2"])
            try await waitUntil { fake.discoveryCalls.value.last == "SetDiscoveryFilter" }
            #expect(fake.discoveryCalls.value.contains("StopDiscovery"))
        }
    }

    @Test func concurrentScansShareOneDiscoveryAndEachSeesItsOwnFilter() async throws {
        try await withScanningAdapter { fake, adapter in
            let hearts = try await adapter.scan(ScanFilter(serviceUUIDs: [BluetoothUUID(Self.heartRate)!]))
            let named = try await adapter.scan(ScanFilter(namePrefix: "bat"))
            #expect(fake.discoveryCalls.value.filter { $0 == "StartDiscovery" }.count == 1)
            // With one scan unfiltered by service, BlueZ must not filter by service either.
            #expect(fake.discoveryFilter.value["UUIDs"] == nil)
            try await fake.addDevice("00:11:22:33:44:01", name: "battery", uuids: [Self.battery])
            try await fake.addDevice("00:11:22:33:44:02", name: "heart", uuids: [Self.heartRate])
            let heart = try await hearts.first(timeout: .safetyNet)
            let battery = try await named.first(timeout: .safetyNet)
            #expect(heart.name == "heart")
            #expect(battery.name == "battery")
            try await waitUntil { fake.discoveryCalls.value.contains("StopDiscovery") }
            #expect(fake.discoveryCalls.value.filter { $0 == "StopDiscovery" }.count == 1)
        }
    }

    @Test func duplicatesAndSignalStrengthAreFilteredAsAsked() async throws {
        try await withScanningAdapter { fake, adapter in
            let strong = try await adapter.scan(ScanFilter(minimumRSSI: -60, allowsDuplicates: true))
            #expect(try fake.discoveryFilter.value.decode("RSSI", as: Int16.self) == -60)
            try await fake.addDevice("00:11:22:33:44:05", name: "far", rssi: -90)
            try await fake.addDevice("00:11:22:33:44:06", name: "near", rssi: -30)
            fake.report("00:11:22:33:44:06", rssi: -35)
            fake.report("00:11:22:33:44:06", rssi: -80)
            fake.report("00:11:22:33:44:06", rssi: -33)
            var rssis: [Int] = []
            for try await discovery in strong {
                #expect(discovery.name == "near")
                rssis.append(discovery.rssi ?? 0)
                if rssis.count == 3 { break }
            }
            #expect(rssis == [-30, -35, -33])
        }
    }

    @Test func aScanDiscardedWithoutIteratingStopsDiscovery() async throws {
        try await withScanningAdapter { fake, adapter in
            var scan: ScanStream? = try await adapter.scan()
            #expect(fake.discoveryCalls.value.contains("StartDiscovery"))
            _ = scan
            scan = nil
            try await waitUntil { fake.discoveryCalls.value.contains("StopDiscovery") }
        }
    }

    @Test func aScanCancelledBeforeBlueZAnswersStartDiscoveryStopsDiscovery() async throws {
        try await withScanningAdapter { fake, adapter in
            fake.replyDelay.value = .seconds(2)
            let scanning = Task { _ = try await adapter.scan() }
            try await waitUntil { fake.discoveryCalls.value.contains("StartDiscovery") }
            scanning.cancel()
            _ = await scanning.result
            try await waitUntil { fake.discoveryCalls.value.last == "StopDiscovery" }
        }
    }

    @Test func firstWithATimeoutThrowsTimeoutAndStopsDiscovery() async throws {
        try await withScanningAdapter { fake, adapter in
            let error = await #expect(throws: BluetoothError.self) {
                try await adapter.scan(ScanFilter(namePrefix: "nobody")).first(timeout: .milliseconds(100))
            }
            #expect(error?.code == .timeout)
            try await waitUntil { fake.discoveryCalls.value.contains("StopDiscovery") }
        }
    }

    @Test(arguments: [false, true])
    func bluetoothdLeavingTheBusEndsTheScanAsDaemonUnavailable(adapterRemovedFirst: Bool) async throws {
        try await withScanningAdapter { fake, adapter in
            let scan = try await adapter.scan()
            // A stopping bluetoothd removes its adapters before it leaves the bus.
            if adapterRemovedFirst { await fake.connection.unexport("/org/bluez/hci0") }
            await fake.connection.close()
            let error = await #expect(throws: BluetoothError.self) { for try await _ in scan {} }
            #expect(error?.code == .daemonUnavailable, "\(String(describing: error))")
        }
    }

    @Test func anAdapterThatGoesAwayAloneEndsTheScanAsAdapterRemoved() async throws {
        try await withScanningAdapter { fake, adapter in
            let scan = try await adapter.scan()
            await fake.connection.unexport("/org/bluez/hci0")
            let error = await #expect(throws: BluetoothError.self) { for try await _ in scan {} }
            #expect(error?.code == .adapterRemoved, "\(String(describing: error))")
        }
    }

    @Test func advertisedDataIsDecodedFromTheDeviceProperties() throws {
        let properties: [String: DBusVariant] = [
            "Address": DBusVariant("00:AA:01:01:00:01"), "AddressType": DBusVariant("random"),
            "Name": DBusVariant("bvm"), "RSSI": DBusVariant(Int16(-42)), "TxPower": DBusVariant(Int16(4)),
            "UUIDs": DBusVariant([Self.heartRate]), "Appearance": DBusVariant(UInt16(0x0341)),
            "ManufacturerData": DBusVariant([UInt16(0x004C): DBusVariant([UInt8]([1, 2]))]),
            "ServiceData": DBusVariant([Self.battery: DBusVariant([UInt8]([99]))]),
        ]
        let discovery = try #require(Discovery(bluezDevice: properties))
        #expect(discovery.address == BluetoothAddress("00:AA:01:01:00:01"))
        #expect(discovery.addressType == .random)
        #expect(discovery.rssi == -42)
        #expect(discovery.advertisement.txPowerLevel == 4)
        #expect(discovery.advertisement.appearance == 0x0341)
        #expect(discovery.advertisement.manufacturerData == [0x004C: [1, 2]])
        #expect(discovery.advertisement.serviceData == [BluetoothUUID(Self.battery)!: [99]])
        #expect(discovery.advertisement.serviceUUIDs == [BluetoothUUID(Self.heartRate)!])
        #expect(Discovery(bluezDevice: ["Address": DBusVariant(UInt32(1))]) == nil)
    }
}
