import Able
import AbleBlueZ
import AbleDBus
import AbleIO
import Foundation
import Synchronization
import Testing

/// The guest's two adapters through Able (hci0 the central, hci1 the peripheral), and the
/// test's own bus connection for what Able cannot do yet (advertising) and for asking BlueZ
/// directly what it thinks.
struct Rig: Sendable {
    let bus: DBusConnection
    let central: Adapter
    let peripheral: Adapter
    let centralAddress: BluetoothAddress
    let peripheralAddress: BluetoothAddress

    /// How long a scan may take to see an advertisement: the emulated controllers send one
    /// report per advertising enable, and a missed one costs a whole discovery cycle.
    static let discoveryTimeout = Duration.seconds(30)
    /// How long connecting may take, services included.
    static let connectTimeout = Duration.seconds(30)

    /// hci1's device object on hci0, as BlueZ names it.
    var peripheralOnCentral: DBusObjectPath {
        BlueZ.adapterPath(Guest.central).appending(peripheralAddress.bluezPathComponent)!
    }

    /// hci0's device object on hci1, as BlueZ names it.
    var centralOnPeripheral: DBusObjectPath {
        BlueZ.adapterPath(Guest.peripheral).appending(centralAddress.bluezPathComponent)!
    }

    /// Removes each adapter's device object of the other, dropping links and bonds, so that the
    /// next test starts from scratch.
    func forgetEachOther() async {
        await bus.removeDevices(of: Guest.central, address: peripheralAddress.description)
        await bus.removeDevices(of: Guest.peripheral, address: centralAddress.description)
    }

    /// A `Device1` property of `device` as BlueZ has it now, `nil` when the object does not exist.
    func bluezDevice<T: DBusRepresentable>(_ name: String, of device: DBusObjectPath, as type: T.Type = T.self) async
        -> T?
    {
        try? await bus.bluezProperty(name, of: BlueZ.device1, at: device, as: T.self)
    }

    /// Registers a connectable, discoverable advertisement of `uuids` on hci1 for `body`.
    ///
    /// Keep `name` short: a 128-bit UUID and the flags leave 10 bytes of legacy advertising data.
    func advertising<T>(_ uuids: [BluetoothUUID], name: String, _ body: () async throws -> T) async throws -> T {
        let owner = try #require(try await bus.nameOwner(of: BlueZ.service), "org.bluez has no owner")
        let advertisement = Advertisement(
            path: DBusObjectPath(rawValue: "/org/able/tests/advertisement_\(Self.nextAdvertisement())")!,
            serviceUUIDs: uuids.map(\.uuidString), localName: name)
        return try await bus.withAdvertisement(advertisement, on: Guest.peripheral, bluezOwner: owner, body)
    }

    private static let advertisements = Atomic<Int>(0)
    private static func nextAdvertisement() -> Int { advertisements.add(1, ordering: .relaxed).newValue }

    /// Scans hci0 with `filter` (by default for `uuids`), then advertises `uuids` on hci1, and runs
    /// `body` with the first discovery while the advertisement is still up.
    ///
    /// Scanning starts first: the kernel drops an advertising report that comes before discovery runs.
    func discovering<T>(
        _ uuids: [BluetoothUUID], name: String = "able", filter: ScanFilter? = nil,
        _ body: (Able.Discovery) async throws -> T
    ) async throws -> T {
        let scan = try await central.scan(filter ?? ScanFilter(serviceUUIDs: uuids))
        return try await advertising(uuids, name: name) {
            let discovery = try await scan.first(timeout: Self.discoveryTimeout)
            try #require(discovery.address == peripheralAddress, "found \(discovery), not hci1")
            return try await body(discovery)
        }
    }

    /// Connects to a discovered peripheral for `body`, and disconnects afterwards.
    func connected<T>(to discovery: Able.Discovery, _ body: (Peripheral) async throws -> T) async throws -> T {
        let peripheral = central.peripheral(for: discovery)
        try await connect(peripheral, from: Guest.central)
        return try await withCleanup {
            try await body(peripheral)
        } cleanup: {
            do {
                try await peripheral.disconnect()
            } catch {
                Issue.record(error, "could not disconnect from \(peripheral.address)")
            }
        }
    }

    /// Connects `peripheral` from `adapter` within ``connectTimeout``. When that fails, the error
    /// also says what BlueZ showed then of the link and of hci1's advertising, since CI keeps
    /// only the end of the guest's logs.
    func connect(_ peripheral: Peripheral, from adapter: String) async throws {
        let start = ContinuousClock.now
        do {
            try await peripheral.connect(timeout: Self.connectTimeout)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            let report = await linkReport(from: adapter, to: peripheral.address)
            throw ConnectFailed(
                description:
                    "\(adapter) → \(peripheral.address) after \(ContinuousClock.now - start): \(error); \(report)")
        }
    }

    /// What BlueZ's objects say about `adapter`'s device `address`, and about hci1's advertising
    /// and links.
    func linkReport(from adapter: String, to address: BluetoothAddress) async -> String {
        guard let tree = try? await bus.bluezObjects(timeout: .seconds(5)) else { return "no object tree" }
        func flags(_ properties: ObjectTree.Properties) -> String {
            ["Connected", "ServicesResolved", "Paired"].map {
                "\($0)=\((try? properties.decode($0, as: Bool.self)).map(String.init) ?? "?")"
            }.joined(separator: " ")
        }
        let devices = tree.devices(of: BlueZ.adapterPath(adapter), address: address.description)
        let device = devices.values.first.map(flags) ?? "no device object"
        let hci1 = BlueZ.adapterPath(Guest.peripheral)
        let instances = try? tree[hci1, BlueZ.leAdvertisingManager1]?.decode("ActiveInstances", as: UInt8.self)
        let links = tree.objects(with: BlueZ.device1).filter { path, properties in
            path.parent == hci1 && (try? properties.decode("Connected", as: Bool.self)) == true
        }.compactMap { try? $0.value.decode("Address", as: String.self) }.sorted()
        return "\(adapter)'s device: \(device); hci1 advertising instances: \(instances.map(String.init) ?? "?"),"
            + " linked to: \(links)"
    }

    /// Serves `definition` on hci1 for `body`, and closes the server afterwards.
    func serving<T>(_ definition: GATTServerDefinition, _ body: (GATTServer) async throws -> T) async throws -> T {
        let server = try await GATTServer.start(on: peripheral, definition: definition)
        return try await withCleanup {
            try await body(server)
        } cleanup: {
            await server.close()
        }
    }

    /// Serves `definition` on hci1, finds it from hci0 by its advertised `uuids`, connects, and
    /// runs `body`; then disconnects, stops advertising and closes the server.
    func withConnectedServer<T>(
        _ definition: GATTServerDefinition, advertising uuids: [BluetoothUUID],
        _ body: (GATTServer, Peripheral) async throws -> T
    ) async throws -> T {
        try await serving(definition) { server in
            try await discovering(uuids) { discovery in
                try await connected(to: discovery) { peripheral in try await body(server, peripheral) }
            }
        }
    }
}

/// Runs `body` with a ``Rig``: hci0 and hci1 through Able, both powered, neither knowing the
/// other (each adapter's device object of the other is removed before and after).
func withRig<T>(_ body: (Rig) async throws -> T) async throws -> T {
    try await withSystemBus { bus in
        // After a bluetoothd restart, Able's copy of the tree may need a moment to fill up again.
        let problem = Recorder<String>()
        let what = "Able to see hci0 and hci1 powered"
        let adapters = try await rethrowingTimeout(adding: { problem.last }) {
            try await poll(timeout: .seconds(30), waitingFor: what) { () async -> (Adapter, Adapter)? in
                do {
                    let central = try await Adapter.named(Guest.central)
                    let peripheral = try await Adapter.named(Guest.peripheral)
                    let states = (await central.state, await peripheral.state)
                    guard states.0.isPowered, states.1.isPowered else {
                        problem.append("states: \(states.0), \(states.1)")
                        return nil
                    }
                    return (central, peripheral)
                } catch {
                    problem.append("\(error)")
                    return nil
                }
            }
        }
        if let last = problem.last { print("Able needed a while to see both adapters; last: \(last)") }
        let (central, peripheral) = adapters
        let rig = Rig(
            bus: bus, central: central, peripheral: peripheral,
            centralAddress: try #require(await central.state.address),
            peripheralAddress: try #require(await peripheral.state.address))
        await rig.forgetEachOther()
        return try await withCleanup {
            try await body(rig)
        } cleanup: {
            await rig.forgetEachOther()
        }
    }
}

/// Waits until `condition` holds, checking every 100 ms for at most `timeout`.
func eventually(
    _ what: String, timeout: Duration = .seconds(10), _ condition: () async throws -> Bool
) async throws {
    try await poll(every: .milliseconds(100), timeout: timeout, waitingFor: what) {
        () async -> Void? in (try? await condition()) == true ? () : nil
    }
}

/// Whether `condition` stays false for all of `duration`, checked every 100 ms.
func staysFalse(for duration: Duration, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + duration
    while ContinuousClock.now < deadline {
        if (try? await condition()) == true { return false }
        try await Task.sleep(for: .milliseconds(100))
    }
    return true
}

/// What handlers saw, in order, shared between them and the test.
final class Recorder<Element: Sendable>: Sendable {
    private let elements = Lock<[Element]>([])

    func append(_ element: Element) { elements.withLock { $0.append(element) } }

    var all: [Element] { elements.withLock { $0 } }

    var last: Element? { elements.withLock { $0.last } }
}

extension BluetoothUUID {
    /// A new random 128-bit UUID, so a test never sees what an earlier one advertised or served.
    ///
    /// - Important: Keep UUIDs in a class (`final class UUIDs` in a test) or an array, not in
    ///   locals that the tests' nested async closures capture. `BluetoothUUID` holds a `UInt128`,
    ///   16-byte aligned, and with Swift 6.3.1 on Linux such values captured by nested
    ///   non-escaping async closures crash the process (a jump to address 0 in `swift_job_run`).
    static func random() -> BluetoothUUID { BluetoothUUID(UUID().uuidString)! }
}

/// The outcome of an operation that should fail, for asserting on.
func failure<T>(of operation: () async throws -> T) async -> (any Error)? {
    do {
        _ = try await operation()
        return nil
    } catch {
        return error
    }
}

/// Runs `body`; when it times out, adds what `detail` says to the ``TimedOut`` error.
func rethrowingTimeout<T>(adding detail: () -> String?, _ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as TimedOut {
        guard let detail = detail() else { throw error }
        throw TimedOut(waitingFor: "\(error.waitingFor) (last seen: \(detail))", timeout: error.timeout)
    }
}

/// A connection in the real tier that did not come up, with what BlueZ showed then.
struct ConnectFailed: Error, CustomStringConvertible {
    let description: String
}
