public import AbleCore
import AbleIO
import Foundation
import Testing

/// Where the scenarios run: two adapters that see each other, a central and a peripheral, on
/// the simulated radio or on real BlueZ.
///
/// The scenarios are written once, against the public API only; each backend supplies its
/// adapters, its notion of time and its checks after a scenario.
public protocol ScenarioBackend: Sendable {
    /// The adapter that scans and connects (hci0 in the guest).
    var central: Adapter { get }
    /// The adapter that serves and advertises (hci1 in the guest).
    var peripheral: Adapter { get }
    /// How long a scan may take to see an advertisement.
    var discoveryTimeout: Duration { get }
    /// How long connecting may take, services included.
    var connectTimeout: Duration { get }
    /// Whether a GATT server learns which central subscribed (the simulator always; BlueZ from 5.69).
    var namesSubscribers: Bool { get }
    /// Whether a GATT server can notify one central only (the simulator always; BlueZ from 5.76).
    var notifiesOneCentral: Bool { get }
    /// Whether a GATT server can indicate one central and hear its own confirmation (the
    /// simulator always; BlueZ from 5.80).
    var indicatesOneCentral: Bool { get }
    /// The notification pacing the link between the adapters carries.
    var serverPacing: NotificationPacing { get }
    /// Whether a GATT server hears why a central's link ended (the simulator always; BlueZ from
    /// 5.83, which announces `Device1.Disconnected`).
    var reportsDisconnectionReasons: Bool { get }
    /// Whether the test process runs this backend's scenarios alone, one at a time, so that its
    /// resident memory is theirs (the real tier, a serialized suite in the guest). The simulated
    /// radio's scenarios run alongside the rest of the host suite, whose tests load and free
    /// megabytes meanwhile.
    var hasItsProcessToItself: Bool { get }
    /// Waits `duration` in the backend's time: simulated on the simulator, real on BlueZ.
    func pause(_ duration: Duration) async throws
    /// Runs after each scenario, whatever its outcome: the simulator checks that nothing was
    /// left open, BlueZ forgets the devices so that the next scenario starts afresh.
    func tearDown() async throws
    /// The version of the BlueZ the backend runs, `nil` on the simulated radio (which imitates
    /// BlueZ 5.82), for the few behaviours of `bluetoothd` that differ between versions. No
    /// default: a backend that wraps another must forward it, or version conditions go silent.
    var bluezVersion: (major: Int, minor: Int)? { get }
    /// The time since the backend started, where it is exact (the simulated radio's clock inside
    /// `run`); `nil` on real BlueZ, whose timing a scenario can only bound.
    var now: Duration? { get }
}

/// A backend that adds to another (the lifecycle backends add adapter removal and link drops):
/// everything ``ScenarioBackend`` asks for comes from ``base``, so that no version condition or
/// capability is lost by forgetting to forward it.
public protocol ScenarioBackendWrapper: ScenarioBackend {
    associatedtype Base: ScenarioBackend
    var base: Base { get }
}

extension ScenarioBackendWrapper {
    public var central: Adapter { base.central }
    public var peripheral: Adapter { base.peripheral }
    public var discoveryTimeout: Duration { base.discoveryTimeout }
    public var connectTimeout: Duration { base.connectTimeout }
    public var namesSubscribers: Bool { base.namesSubscribers }
    public var notifiesOneCentral: Bool { base.notifiesOneCentral }
    public var indicatesOneCentral: Bool { base.indicatesOneCentral }
    public var serverPacing: NotificationPacing { base.serverPacing }
    public var reportsDisconnectionReasons: Bool { base.reportsDisconnectionReasons }
    public var hasItsProcessToItself: Bool { base.hasItsProcessToItself }
    public var bluezVersion: (major: Int, minor: Int)? { base.bluezVersion }
    public var now: Duration? { base.now }
    public func pause(_ duration: Duration) async throws { try await base.pause(duration) }
    public func tearDown() async throws { try await base.tearDown() }
}

extension ScenarioBackend {
    /// Backends that say nothing name no subscriber and cannot notify one central.
    public var namesSubscribers: Bool { false }
    public var notifiesOneCentral: Bool { false }
    public var indicatesOneCentral: Bool { false }
    public var serverPacing: NotificationPacing { .default }
    public var reportsDisconnectionReasons: Bool { false }
    public var hasItsProcessToItself: Bool { false }
    public var now: Duration? { nil }

    /// Waits until `condition` holds, checking every 20 ms of the backend's time; fails after `timeout`.
    func eventually(
        _ what: String, timeout: Duration = .seconds(15), sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: () async throws -> Bool
    ) async throws {
        var waited = Duration.zero
        while try await !condition() {
            guard waited < timeout else {
                Issue.record("waited \(timeout) for \(what)", sourceLocation: sourceLocation)
                throw ScenarioFailure(description: "waited \(timeout) for \(what)")
            }
            try await pause(.milliseconds(20))
            waited += .milliseconds(20)
        }
    }
}

/// A scenario gave up; the issue is recorded where it happened.
struct ScenarioFailure: Error, CustomStringConvertible {
    var description: String
}

/// Runs `body`, then `cleanup` whether `body` threw or not.
func withCleanup<T>(_ body: () async throws -> T, cleanup: () async -> Void) async throws -> T {
    do {
        let result = try await body()
        await cleanup()
        return result
    } catch {
        await cleanup()
        throw error
    }
}

/// Collects values from handlers running elsewhere.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Lock<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

extension BluetoothUUID {
    /// A fresh 128-bit UUID, so that a scenario never finds what another one left behind.
    static func random() -> BluetoothUUID { BluetoothUUID(UUID().uuidString)! }
}
