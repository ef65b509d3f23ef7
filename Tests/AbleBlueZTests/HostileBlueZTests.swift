import Able
import AbleDBus
import AbleScenarios
import AbleTestSupport
import Testing

@testable import AbleBlueZ

/// A `bluetoothd` that misbehaves on purpose: properties of the wrong type, a `Connect` that never
/// answers, `ServicesResolved` that never comes, a characteristic removed before its first value,
/// the adapter removed mid-scan, signals from another sender, a flood of signals. Each ends in a
/// typed error or a documented behaviour within its timeout, and afterwards the connection holds
/// no more than before it: calls awaiting replies (each a continuation), signal subscribers,
/// followed names, the tree's listeners (each a task) and value receivers, and match rules in the
/// bus daemon.
@Suite(.timeLimit(.minutes(1)))
struct HostileBlueZTests {
    static let address = PeripheralTests.address
    /// What a notification stream buffers, as its documentation says.
    static let notificationBuffer = 16_384

    /// What a connection to BlueZ holds; equal before and after an operation that ended.
    struct Resources: Equatable, CustomStringConvertible {
        var pendingCalls: Int
        var subscribers: Int
        var trackedNames: Int
        var treeListeners: Int
        var valueReceivers: Int
        var matchRules: UInt32

        var description: String {
            "\(pendingCalls) pending calls, \(subscribers) subscribers, \(trackedNames) followed names, "
                + "\(treeListeners) tree listeners, \(valueReceivers) value receivers, \(matchRules) match rules"
        }
    }

    struct Setup {
        let bus: PrivateBus
        let fake: FakeBlueZ
        let device: FakeDevice
        let system: BlueZSystem
        let adapter: Adapter
        let peripheral: Peripheral
        /// A connection of the test's own, for asking the bus daemon.
        let observer: DBusConnection

        func resources() async throws -> Resources {
            let counts = await system.connection.resourceCounts
            let tree = system.tree.resourceCounts
            let reply = try await observer.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus.Debug.Stats", method: "GetConnectionStats",
                arguments: [.string(system.connection.uniqueName)])
            let stats = try reply[0].decode([String: DBusVariant].self)
            return Resources(
                pendingCalls: counts.pendingCalls, subscribers: counts.subscribers, trackedNames: counts.trackedNames,
                treeListeners: tree.listeners, valueReceivers: tree.valueReceivers,
                matchRules: try stats.decode("MatchRules", as: UInt32.self) ?? 0)
        }

        /// Waits until the resources are back to `baseline` and stay there for three looks in a
        /// row (work that ends asynchronously, such as a `StopDiscovery` after a scan, may start
        /// after a first look), failing after `Duration.safetyNet`.
        func expectBack(to baseline: Resources, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            var now = try await resources()
            var steady = 0
            let deadline = ContinuousClock.now + .safetyNet
            while steady < 3, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                now = try await resources()
                steady = now == baseline ? steady + 1 : 0
            }
            #expect(steady == 3, "before: \(baseline); after: \(now)", sourceLocation: sourceLocation)
        }
    }

    func withSetup(_ body: (Setup) async throws -> Void) async throws {
        let bus = try PrivateBus()
        let fake = try await FakeBlueZ.start(on: bus)
        let device = try await fake.addConnectableDevice(Self.address, services: PeripheralTests.services)
        let system = try await BlueZSystem.open(on: try await bus.connect())
        let adapter = Adapter(backend: try await BlueZAdapterBackend.open(name: "hci0", system: system))
        let peripheral = adapter.peripheral(address: BluetoothAddress(Self.address)!)
        try await body(
            Setup(
                bus: bus, fake: fake, device: device, system: system, adapter: adapter, peripheral: peripheral,
                observer: try await bus.connect()))
    }

    @Test func propertiesOfTheWrongTypeReadAsAbsent() async throws {
        try await withSetup { setup in
            let baseline = try await setup.resources()
            // Two signals, applied in the order sent: once the second is seen, so is the first.
            setup.fake.change("hci0", "Address", to: .uint32(1))
            setup.fake.change("hci0", "Powered", to: .string("yes"))
            try await waitUntil { await !setup.adapter.state.isPowered }
            #expect(await setup.adapter.state.address == nil)

            let scan = try await setup.adapter.scan()
            // A device whose address is not a string is no discovery; one whose other properties
            // have the wrong types is discovered without them.
            try await setup.fake.connection.export(
                [
                    DBusInterface(
                        "org.bluez.Device1",
                        properties: [.constant("Address", UInt32(7)), .constant("RSSI", Int16(-30))])
                ], at: setup.fake.devicePath("00:11:22:33:44:01", on: "hci0"))
            try await setup.fake.connection.export(
                [
                    DBusInterface(
                        "org.bluez.Device1",
                        properties: [
                            .constant("Address", "00:11:22:33:44:02"), .constant("RSSI", "loud"),
                            .constant("UUIDs", UInt16(0x180D)), .constant("Name", [UInt8(1)]),
                            .constant("ManufacturerData", ["apple": DBusVariant([UInt8(1)])]),
                            .constant("ServiceData", [UInt16(1): DBusVariant("x")]),
                        ])
                ], at: setup.fake.devicePath("00:11:22:33:44:02", on: "hci0"))
            let discovery = try await scan.first(timeout: .safetyNet)
            #expect(discovery.address == BluetoothAddress("00:11:22:33:44:02"))
            #expect(discovery.rssi == nil)
            #expect(discovery.advertisement == AdvertisementData())
            try await setup.expectBack(to: baseline)
        }
    }

    @Test func aConnectThatNeverAnswersTimesOutAndIsCalledOff() async throws {
        try await withSetup { setup in
            let baseline = try await setup.resources()
            setup.device.connectHangs.value = true
            let error = await #expect(throws: BluetoothError.self) {
                try await setup.peripheral.connect(timeout: .milliseconds(300))
            }
            #expect(error?.code == .timeout)
            try await waitUntil { setup.device.calls.value.contains("Disconnect") }
            setup.device.connectHangs.value = false
            try await setup.expectBack(to: baseline)
        }
    }

    /// What a soak on BlueZ 5.66 met: `bluetoothd` crashed between answering `Connect` and
    /// answering the properties read that follows it. Whichever of the two the crash beats, the
    /// connection fails with `daemonUnavailable` (before, the bus's `NoReply` or `ServiceUnknown`
    /// came through untranslated, and a maintained connection gave up on it).
    @Test func bluetoothdLeavingTheBusRightAfterConnectIsDaemonUnavailable() async throws {
        try await withSetup { setup in
            setup.device.leavesTheBusAfterConnect.value = true
            let error = await #expect(throws: BluetoothError.self) {
                try await setup.peripheral.connect(timeout: .safetyNet)
            }
            #expect(error?.code == .daemonUnavailable, "\(String(describing: error))")
            #expect(error.map(ReconnectPolicy.isTransient) == true)
        }
    }

    @Test func servicesThatNeverResolveTimeOutAndLeaveNothingBehind() async throws {
        try await withSetup { setup in
            let baseline = try await setup.resources()
            setup.device.neverResolves.value = true
            let error = await #expect(throws: BluetoothError.self) {
                try await setup.peripheral.connect(timeout: .milliseconds(300))
            }
            #expect(error?.code == .timeout)
            try await waitUntil { setup.device.calls.value.last == "Disconnect" }
            try await setup.expectBack(to: baseline)
        }
    }

    @Test func aCharacteristicRemovedBeforeItsFirstValueEndsItsStream() async throws {
        try await withSetup { setup in
            try await setup.peripheral.connect(timeout: .safetyNet)
            let baseline = try await setup.resources()
            setup.device.removesCharacteristicOnStartNotify.value = true
            setup.device.startNotifyDelay.value = .milliseconds(100)
            let values = try await setup.peripheral.notifications(of: SeedCharacteristic.b2)
            let error = await #expect(throws: BluetoothError.self) { for try await _ in values {} }
            // Still connected: the peripheral's services changed under the stream.
            #expect(error?.code == .attributeRemoved, "\(String(describing: error))")
            #expect(error?.message.contains(SeedCharacteristic.b2.uuid.description) == true)
            try await setup.expectBack(to: baseline)
            try await setup.peripheral.disconnect()
        }
    }

    @Test func aReadOfACharacteristicRemovedUnderTheCallSaysTheAttributeWasRemoved() async throws {
        try await withSetup { setup in
            try await setup.peripheral.connect(timeout: .safetyNet)
            setup.device.removesCharacteristicOnRead.value = true
            let error = await #expect(throws: BluetoothError.self) {
                try await setup.peripheral.read(SeedCharacteristic.b2)
            }
            // Still connected: the peripheral's services changed under the read.
            #expect(error?.code == .attributeRemoved, "\(String(describing: error))")
            #expect(error?.message.contains(SeedCharacteristic.b2.uuid.description) == true)
            #expect((error?.cause as? BluetoothError)?.code == .doesNotExist)
            try await setup.peripheral.disconnect()
        }
    }

    @Test func theAdapterRemovedMidScanEndsTheScanAndLeavesNothingBehind() async throws {
        try await withSetup { setup in
            let baseline = try await setup.resources()
            let scan = try await setup.adapter.scan()
            await setup.fake.connection.unexport("/org/bluez/hci0")
            let error = await #expect(throws: BluetoothError.self) { for try await _ in scan {} }
            #expect(error?.code == .adapterRemoved, "\(String(describing: error))")
            try await setup.expectBack(to: baseline)
        }
    }

    /// A connect to an address BlueZ does not know scans for it first; the adapter going away
    /// (removed, or `bluetoothd` leaving the bus) ends that search at once, not at the timeout.
    @Test(arguments: [BluetoothError.Code.adapterRemoved, .daemonUnavailable])
    func theAdapterGoingAwayEndsAConnectThatLooksForItsDevice(_ code: BluetoothError.Code) async throws {
        try await withSetup { setup in
            let absent = setup.adapter.peripheral(address: BluetoothAddress("00:11:22:33:44:99"))
            let ended = try await withThrowingTaskGroup(of: BluetoothError?.self) { group in
                group.addTask {
                    do {
                        try await absent.connect(timeout: .seconds(60))
                        return nil
                    } catch let error as BluetoothError {
                        return error
                    }
                }
                try await waitUntil { setup.fake.discoveryCalls.value.contains("StartDiscovery") }
                if code == .adapterRemoved {
                    await setup.fake.connection.unexport("/org/bluez/hci0")
                } else {
                    await setup.fake.connection.close()
                }
                return try await group.next() ?? nil
            }
            #expect(ended?.code == code, "\(String(describing: ended))")
        }
    }

    @Test func signalsFromAnotherSenderThanBlueZAreIgnored() async throws {
        try await withSetup { setup in
            let impostor = try await setup.bus.connect()
            // It claims the adapter went off and a device appeared.
            impostor.emitPropertiesChanged(
                path: "/org/bluez/hci0", interface: "org.bluez.Adapter1", changed: ["Powered": .boolean(false)])
            try await impostor.exportObjectManager(at: .root)
            try await impostor.export(
                [DBusInterface("org.bluez.Device1", properties: [.constant("Address", "00:11:22:33:44:66")])],
                at: setup.fake.devicePath("00:11:22:33:44:66", on: "hci0"))
            // Then BlueZ itself changes something: once that arrived, so had the impostor's.
            setup.fake.change("hci0", "Alias", to: .string("after"))
            try await waitUntil { await setup.adapter.state.alias == "after" }
            #expect(await setup.adapter.state.isPowered)
            #expect(setup.system.tree.interfaces(at: setup.fake.devicePath("00:11:22:33:44:66", on: "hci0")) == nil)
            await impostor.close()
        }
    }

    @Test func aFloodOfNotificationsIsBoundedAndCounted() async throws {
        try await withSetup { setup in
            try await setup.peripheral.connect(timeout: .safetyNet)
            let baseline = try await setup.resources()
            let values = try await setup.peripheral.notifications(of: SeedCharacteristic.b2)
            let sent = Self.notificationBuffer + 5_000
            for index in 0..<sent { setup.device.notify(1, 1, [UInt8(index % 256), UInt8(index / 256 % 256)]) }
            // A marker after the flood: once the device properties changed, every value was read.
            setup.fake.connection.emitPropertiesChanged(
                path: setup.device.path, interface: "org.bluez.Device1", changed: ["RSSI": .int16(-1)])
            try await waitUntil {
                try setup.system.tree.properties(of: "org.bluez.Device1", at: setup.device.path)?.decode(
                    "RSSI", as: Int16.self) == -1
            }
            #expect(values.droppedCount == sent - Self.notificationBuffer)
            var iterator = values.makeAsyncIterator()
            // The oldest values are kept, in order.
            for index in 0..<Self.notificationBuffer {
                let value = try await iterator.next()
                guard value == [UInt8(index % 256), UInt8(index / 256 % 256)] else {
                    Issue.record("value \(index) is \(String(describing: value))")
                    break
                }
            }
            try await setup.peripheral.disconnect()
            let error = await #expect(throws: BluetoothError.self) { while try await iterator.next() != nil {} }
            #expect(error?.code == .disconnected)
            try await setup.expectBack(to: baseline)
        }
    }
}
