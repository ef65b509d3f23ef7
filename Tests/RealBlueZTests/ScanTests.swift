import Able
import AbleDBus
import Testing

extension RealBlueZ {
    /// `Adapter.scan` on hci0 against an advertisement on hci1.
    @Suite(.timeLimit(.minutes(2)))
    struct Scanning {
        @Test func aServiceUUIDFilterFindsThePeripheralAndDiscoveryStopsAfterwards() async throws {
            try await withRig { rig in
                let service = [BluetoothUUID.random()]
                try await rig.discovering(service, name: "ablesvc") { discovery in
                    #expect(discovery.address == rig.peripheralAddress)
                    #expect(discovery.addressType == .public)
                    #expect(discovery.advertisement.serviceUUIDs.contains(service[0]))
                    #expect(discovery.name == "ablesvc")
                }
                // The scan ended with `first(timeout:)`: it was the only one, so discovery stops.
                try await eventually("hci0 to stop discovering") {
                    try await rig.bus.bluezProperty(
                        "Discovering", of: BlueZ.adapter1, at: BlueZ.adapterPath(Guest.central), as: Bool.self) == false
                }
                try await eventually("Able to see hci0 stop discovering") { await !rig.central.state.isDiscovering }
            }
        }

        @Test func ablesOwnAdvertisementIsFoundAndStopEndsIt() async throws {
            try await withRig { rig in
                let service = [BluetoothUUID.random()]
                let activeInstances = {
                    try await rig.bus.bluezProperty(
                        "ActiveInstances", of: BlueZ.leAdvertisingManager1, at: BlueZ.adapterPath(Guest.peripheral),
                        as: UInt8.self)
                }
                let scan = try await rig.central.scan(ScanFilter(serviceUUIDs: service))
                let advertising = try await rig.peripheral.startAdvertising(
                    Able.Advertisement(localName: "ableadv", serviceUUIDs: service))
                try await withCleanup {
                    let discovery = try await scan.first(timeout: Rig.discoveryTimeout)
                    #expect(discovery.address == rig.peripheralAddress)
                    #expect(discovery.name == "ableadv")
                    #expect(discovery.advertisement.serviceUUIDs == service)
                    #expect(await advertising.isActive)
                    #expect(try await activeInstances() == 1)
                } cleanup: {
                    await advertising.stop()
                }
                #expect(await !advertising.isActive)
                try await eventually("BlueZ to drop the advertisement") { try await activeInstances() == 0 }
            }
        }

        @Test func aScanDroppedWithoutIteratingStopsDiscovery() async throws {
            try await withRig { rig in
                let discovering = {
                    try await rig.bus.bluezProperty(
                        "Discovering", of: BlueZ.adapter1, at: BlueZ.adapterPath(Guest.central), as: Bool.self)
                }
                var scan: ScanStream? = try await rig.central.scan(ScanFilter(serviceUUIDs: [BluetoothUUID.random()]))
                try await eventually("hci0 to start discovering") { try await discovering() }
                // The stream is gone, never iterated: "the scan runs until … the stream is discarded".
                // (An optional set to nil: a `let` lives to the end of its scope in debug builds.)
                _ = scan
                scan = nil
                try await eventually("hci0 to stop discovering", timeout: .seconds(10)) { try await !discovering() }
                // Leave no discovery running for the tests that follow: a new bluetoothd ends it, and
                // the leaked scan's stream ends with the old one.
                if try await discovering() {
                    #expect(try await Guest.restartBluetoothd() == 0, "restart-bluetoothd failed")
                    try await eventually("Able to see hci0 powered again", timeout: .seconds(30)) {
                        await rig.central.state.isPowered
                    }
                }
            }
        }

        @Test func aNamePrefixFilterDeliversOnlyTheNamesItMatches() async throws {
            try await withRig { rig in
                let service = [BluetoothUUID.random()]
                let name = "abl" + String(UInt16.random(in: 0x1000...0xFFFF), radix: 16)
                let matching = try await rig.central.scan(ScanFilter(namePrefix: String(name.prefix(5))))
                let other = Recorder<Able.Discovery>()
                let otherScan = try await rig.central.scan(ScanFilter(namePrefix: name + "x"))
                let watcher = Task {
                    for try await discovery in otherScan { other.append(discovery) }
                }
                defer { watcher.cancel() }
                try await rig.advertising(service, name: name) {
                    let discovery = try await matching.first(timeout: Rig.discoveryTimeout)
                    #expect(discovery.address == rig.peripheralAddress)
                    #expect(discovery.name == name)
                    // Both scans saw the same report; the longer prefix must not match it.
                    let excluded = try await staysFalse(for: .seconds(3)) { !other.all.isEmpty }
                    #expect(excluded, "\(other.all)")
                }
            }
        }

        @Test func anRSSIThresholdAboveAnyRealSignalExcludesThePeripheral() async throws {
            try await withRig { rig in
                let service = [BluetoothUUID.random()]
                // Two scans of one service; only the threshold tells them apart, so BlueZ's merged
                // filter has no RSSI and Able's own filtering must exclude the report.
                let strong = Recorder<Able.Discovery>()
                let strongScan = try await rig.central.scan(ScanFilter(serviceUUIDs: service, minimumRSSI: 20))
                let watcher = Task {
                    for try await discovery in strongScan { strong.append(discovery) }
                }
                defer { watcher.cancel() }
                try await rig.discovering(service) { discovery in
                    let excluded = try await staysFalse(for: .seconds(3)) { !strong.all.isEmpty }
                    // The emulated controller reports RSSI 127, HCI's "not available" (an LE
                    // Advertising Report carries -127...20 dBm, or 127); BlueZ passes it on as is.
                    #expect(discovery.rssi.map { (-127...20).contains($0) } ?? true, "\(discovery)")
                    #expect(excluded, "\(strong.all)")
                }
            }
        }

        @Test func aBluetoothdRestartEndsTheScanAndANewScanWorksAfterwards() async throws {
            try await withRig { rig in
                let service = [BluetoothUUID.random()]
                let scan = try await rig.central.scan(ScanFilter(serviceUUIDs: service))
                let consumer = Task { () -> Result<Int, any Error> in
                    var count = 0
                    do {
                        for try await _ in scan { count += 1 }
                        return .success(count)
                    } catch {
                        return .failure(error)
                    }
                }
                #expect(try await Guest.restartBluetoothd() == 0, "restart-bluetoothd failed (its errors are above)")
                let outcome = try await withDeadline(.seconds(20), waitingFor: "the scan to end") {
                    await consumer.value
                }
                switch outcome {
                case .success(let count):
                    Issue.record("the scan ended without an error after \(count) discoveries")
                case .failure(let error):
                    let code = (error as? BluetoothError)?.code
                    #expect(code == .daemonUnavailable, "the scan threw \(error)")
                }

                // The new bluetoothd serves a new scan (Able must start discovery again).
                try await eventually("Able to see hci0 powered again", timeout: .seconds(30)) {
                    await rig.central.state.isPowered
                }
                try await rig.discovering(service) { discovery in
                    #expect(discovery.advertisement.serviceUUIDs.contains(service[0]))
                }
            }
        }
    }
}
