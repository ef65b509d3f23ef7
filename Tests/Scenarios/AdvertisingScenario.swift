public import AbleCore
public import Testing

/// Advertising and scanning scenarios: every data field from the peripheral adapter seen by
/// the central with the exact bytes, a beacon followed value by value, and the refusals
/// computed from what the adapter reports. Each runs on the simulated radio and on BlueZ.
public enum AdvertisingScenario: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case everyDataField
    case longNameShortenedIntoTheScanResponse
    case scanResponseData
    case beaconFollowedValueByValue
    case refusals
    case updateWhileRunning
    case passiveScanning

    public var testDescription: String { rawValue }

    /// A company identifier for test data (0xFFFF is reserved by the SIG for internal use and tests).
    public static let testCompany: UInt16 = 0xFFFF

    /// Runs the scenario on `backend`, then the backend's tear-down.
    ///
    /// - Parameter requiringSupport: Whether a feature the scenario uses must be offered: `true`
    ///   for a BlueZ started with its experimental interfaces (`bluetoothd -E`), where passive
    ///   scanning and (from 5.80) scan response data are available, so that the scenario fails
    ///   instead of checking the refusal. `false` accepts either the feature or its refusal.
    public func run(on backend: some ScenarioBackend, requiringSupport: Bool = false) async throws {
        try await withCleanup {
            switch self {
            case .everyDataField: try await Self.everyDataField(backend)
            case .longNameShortenedIntoTheScanResponse: try await Self.longNameShortened(backend)
            case .scanResponseData: try await Self.scanResponseData(backend, requiringSupport: requiringSupport)
            case .beaconFollowedValueByValue: try await Self.beacon(backend)
            case .refusals: try await Self.refusals(backend)
            case .updateWhileRunning: try await Self.updateWhileRunning(backend)
            case .passiveScanning: try await Self.passiveScanning(backend, requiringSupport: requiringSupport)
            }
        } cleanup: {
            do {
                try await backend.tearDown()
            } catch {
                Issue.record(error, "tearing down after \(self)")
            }
        }
    }

    /// The advertisement of ``everyDataField``: 29 of the 31 bytes of advertising data, the
    /// name in the scan response.
    public static func everyField(marker: UInt8) -> Advertisement {
        Advertisement(
            localName: "air\(marker)", serviceUUIDs: [BluetoothUUID(uuid16: 0x181A)],
            manufacturerData: [testCompany: [0xA1, marker, 0x03, 0x04]],
            serviceData: [BluetoothUUID(uuid16: 0x181A): [marker, 0x22, 0x33]], appearance: 0x0341,
            includesTxPower: true)
    }

    static func everyDataField(_ backend: some ScenarioBackend) async throws {
        let marker = UInt8.random(in: 1...255)
        let advertisement = everyField(marker: marker)
        #expect(advertisement.layout.advertisingDataLength == 29)
        // The report passes the filter only once the advertising data and the scan response
        // (the name) have both arrived.
        let scan = try await backend.central.scan(
            ScanFilter(namePrefix: "air\(marker)", manufacturerIDs: [testCompany]))
        let advertising = try await backend.peripheral.startAdvertising(advertisement)
        try await withCleanup {
            let found = try await scan.first(timeout: backend.discoveryTimeout)
            #expect(found.address == (await backend.peripheral.state.address))
            #expect(found.isNew)
            #expect(found.name == "air\(marker)")
            #expect(found.advertisement.serviceUUIDs.contains(BluetoothUUID(uuid16: 0x181A)))
            #expect(found.advertisement.manufacturerData == [testCompany: [0xA1, marker, 0x03, 0x04]])
            #expect(found.advertisement.serviceData == [BluetoothUUID(uuid16: 0x181A): [marker, 0x22, 0x33]])
            #expect(found.advertisement.appearance == 0x0341)
            #expect(found.advertisement.txPowerLevel != nil)
            if let flags = found.advertisement.flags {
                // Reported where BlueZ has AdvertisingFlags (5.66 with -E, 5.82).
                #expect(flags.contains(.generalDiscoverable))
                #expect(flags.contains(.bredrNotSupported))
            }
        } cleanup: {
            await advertising.stop()
        }
    }

    static func longNameShortened(_ backend: some ScenarioBackend) async throws {
        let marker = UInt8.random(in: 1...255)
        let name = "lng\(marker)-" + String(repeating: "n", count: 40)
        let solicited = BluetoothUUID.random()
        let advertisement = Advertisement(
            localName: name, manufacturerData: [testCompany: [0x5E, marker]], solicitedUUIDs: [solicited])
        #expect(advertisement.layout.scanResponseLength == 2 + name.utf8.count)
        let scan = try await backend.central.scan(ScanFilter(allowsDuplicates: true, manufacturerIDs: [testCompany]))
        let advertising = try await backend.peripheral.startAdvertising(advertisement)
        try await withCleanup {
            // Bounded by the suite's time limit: a report that never comes fails the test.
            var iterator = scan.makeAsyncIterator()
            var found: Discovery?
            while let report = try await iterator.next() {
                if report.advertisement.manufacturerData[testCompany] == [0x5E, marker], report.name != nil {
                    found = report
                    break
                }
            }
            let discovery = try #require(found)
            // 31 bytes of scan response: the length, the type (Shortened Local Name) and 29 bytes.
            // BlueZ keeps a complete name it cached for the address (from an earlier scenario)
            // over a shortened one, so the name is checked when it is this one's.
            if discovery.name?.hasPrefix("lng\(marker)-") == true {
                #expect(discovery.name == String(name.prefix(29)))
            }
            // BlueZ 5.82 did not report the solicited UUIDs (AdvertisingData) in the guest: they
            // are checked on the simulator and in btmon's trace, not here.
            _ = solicited
        } cleanup: {
            await advertising.stop()
        }
    }

    static func scanResponseData(_ backend: some ScenarioBackend, requiringSupport: Bool) async throws {
        let marker = UInt8.random(in: 1...255)
        let advertisement = Advertisement(
            localName: "rsp\(marker)", manufacturerData: [testCompany: [0x01, marker]],
            scanResponse: AdvertisementData(serviceData: [BluetoothUUID(uuid16: 0xFEAA): [0x10, marker, 0x20]]))
        let capabilities = try await backend.peripheral.advertisingCapabilities()
        guard capabilities.supportsScanResponseData else {
            if requiringSupport { Issue.record("the adapter offers no scan response data") }
            let error = await #expect(throws: BluetoothError.self) {
                try await backend.peripheral.startAdvertising(advertisement)
            }
            #expect(error?.code == .notSupported)
            #expect(error?.message.contains("5.80") == true)
            return
        }
        let scan = try await backend.central.scan(
            ScanFilter(namePrefix: "rsp\(marker)", serviceDataUUIDs: [BluetoothUUID(uuid16: 0xFEAA)]))
        let advertising = try await backend.peripheral.startAdvertising(advertisement)
        try await withCleanup {
            let found = try await scan.first(timeout: backend.discoveryTimeout)
            #expect(found.advertisement.manufacturerData == [testCompany: [0x01, marker]])
            #expect(found.advertisement.serviceData == [BluetoothUUID(uuid16: 0xFEAA): [0x10, marker, 0x20]])
        } cleanup: {
            await advertising.stop()
        }
    }

    /// The values the beacon sends, one every 200 ms.
    static let beaconValues: [UInt8] = Array(0..<10)

    static func beacon(_ backend: some ScenarioBackend) async throws {
        let marker = UInt8.random(in: 1...255)
        func beacon(_ value: UInt8) -> Advertisement {
            Advertisement(manufacturerData: [testCompany: [0xBE, marker, value]], isConnectable: false)
        }
        let scan = try await backend.central.scan(ScanFilter(allowsDuplicates: true, manufacturerIDs: [testCompany]))
        let last = beaconValues.last!
        let advertising = try await backend.peripheral.startAdvertising(beacon(beaconValues[0]))
        // Collected once advertising runs (the scan keeps what comes before), so that a refused
        // advertisement leaves nothing iterating the scan; in a child task, so that it runs
        // where the test runs (on the simulation's executor inside `SimulatedRadio.run`).
        @Sendable func collect() async throws -> [UInt8] {
            var values: [UInt8] = []
            // Not by address: BlueZ sends a non-connectable advertisement from a random
            // (non-resolvable private) address, as btmon showed in the guest.
            for try await report in scan {
                guard let data = report.advertisement.manufacturerData[testCompany], data.count == 3,
                    data[1] == marker
                else { continue }
                // BlueZ reports a change of data once, and a report whose RSSI alone changed again.
                if values.last != data[2] { values.append(data[2]) }
                if data[2] == last { break }
            }
            return values
        }
        try await withCleanup {
            async let collected = withTimeout(backend, backend.discoveryTimeout) { try await collect() }
            for value in beaconValues.dropFirst() {
                try await backend.pause(.milliseconds(200))
                try await advertising.update(beacon(value))
            }
            #expect(try await collected == beaconValues)
        } cleanup: {
            await advertising.stop()
        }
    }

    static func refusals(_ backend: some ScenarioBackend) async throws {
        let adapter = backend.peripheral
        let capabilities = try await adapter.advertisingCapabilities()
        // Too much data: 3 bytes of flags and the rest manufacturer data, one byte more than fits.
        let maximum = capabilities.maximumAdvertisingDataLength
        let tooLong = await #expect(throws: BluetoothError.self) {
            try await adapter.startAdvertising(
                Advertisement(manufacturerData: [testCompany: Array(repeating: 7, count: maximum - 6)]))
        }
        #expect(tooLong?.code == .valueTooLong)
        #expect(tooLong?.message.contains("needs \(maximum + 1) bytes") == true)
        // A secondary channel the controller does not offer.
        if !capabilities.secondaryChannels.contains(.leCoded) {
            let coded = await #expect(throws: BluetoothError.self) {
                try await adapter.startAdvertising(Advertisement(secondaryChannel: .leCoded))
            }
            #expect(coded?.code == .notSupported)
        }
        // A TX power the adapter cannot set.
        if !capabilities.canSetTxPower {
            let power = await #expect(throws: BluetoothError.self) {
                try await adapter.startAdvertising(Advertisement(txPower: -10))
            }
            #expect(power?.code == .notSupported)
        }
        // More sets than instances.
        var sets: [AdvertisingSet] = []
        try await withCleanup {
            for index in 0..<capabilities.availableInstances {
                sets.append(
                    try await adapter.startAdvertising(
                        Advertisement(manufacturerData: [testCompany: [UInt8(index)]], isConnectable: false)))
            }
            let full = await #expect(throws: BluetoothError.self) {
                try await adapter.startAdvertising(Advertisement(isConnectable: false))
            }
            #expect(full?.code == .notAvailable)
        } cleanup: {
            for set in sets { await set.stop() }
        }
    }

    static func updateWhileRunning(_ backend: some ScenarioBackend) async throws {
        let marker = UInt8.random(in: 1...255)
        let scan = try await backend.central.scan(ScanFilter(allowsDuplicates: true, manufacturerIDs: [testCompany]))
        let advertising = try await backend.peripheral.startAdvertising(
            Advertisement(localName: "upd\(marker)", manufacturerData: [testCompany: [marker, 1]]))
        try await withCleanup {
            // Bounded by the suite's time limit: a report that never comes fails the test.
            var iterator = scan.makeAsyncIterator()
            func next(_ value: UInt8) async throws -> Discovery {
                while let report = try await iterator.next() {
                    if report.advertisement.manufacturerData[testCompany] == [marker, value] { return report }
                }
                throw ScenarioFailure(description: "the scan ended")
            }
            let first = try await next(1)
            #expect(first.isNew)
            // A data change goes on air without stopping the set.
            try await advertising.update(
                Advertisement(localName: "upd\(marker)", manufacturerData: [testCompany: [marker, 2]]))
            let second = try await next(2)
            #expect(!second.isNew)
            // A parameter change registers the set again.
            try await advertising.update(
                Advertisement(
                    localName: "upd\(marker)", manufacturerData: [testCompany: [marker, 3]], timeout: .seconds(60)))
            _ = try await next(3)
            #expect(await advertising.isActive)
            #expect(await advertising.advertisement.timeout == .seconds(60))
        } cleanup: {
            await advertising.stop()
        }
        #expect(await !advertising.isActive)
    }

    static func passiveScanning(_ backend: some ScenarioBackend, requiringSupport: Bool) async throws {
        let marker = UInt8.random(in: 1...255)
        let filter = PassiveScanFilter(patterns: [.manufacturer(testCompany, prefix: [0xBE, marker])])
        let scan: ScanStream
        do {
            scan = try await backend.central.passiveScan(filter)
        } catch let error as BluetoothError where error.code == .notSupported && !requiringSupport {
            #expect(error.message.contains("bluetoothd -E"))
            return
        }
        let advertising = try await backend.peripheral.startAdvertising(
            Advertisement(manufacturerData: [testCompany: [0xBE, marker, 7]], isConnectable: false))
        try await withCleanup {
            // Found by its data (the random marker), not by address: BlueZ sends a
            // non-connectable advertisement from a non-resolvable private address.
            let found = try await scan.first(timeout: backend.discoveryTimeout)
            #expect(found.isNew)
            #expect(found.advertisement.manufacturerData[testCompany] == [0xBE, marker, 7])
        } cleanup: {
            await advertising.stop()
        }
    }

    /// Runs `body`, failing with a timeout after `timeout` of the backend's time.
    static func withTimeout<T: Sendable>(
        _ backend: some ScenarioBackend, _ timeout: Duration, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await backend.pause(timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard case .some(.some(let value)) = try await group.next() else {
                Issue.record("waited \(timeout)")
                throw ScenarioFailure(description: "waited \(timeout)")
            }
            return value
        }
    }
}
