import Able
import AbleDBus
import AbleIO
import AbleTestSupport
import Foundation
import Testing

@testable import AbleBlueZ

/// A GATT server's `AcquireNotify` sockets when `bluetoothd` closes them: BlueZ 5.69 and later
/// close the first subscriber's socket when another central leaves, which must not read as that
/// central unsubscribing.
@Suite(.timeLimit(.minutes(1)))
struct ServerNotifySocketsTests {
    let id = AttributeID(service: 0, characteristic: 0)
    let first = Central(address: BluetoothAddress("00:AA:01:00:00:00"))
    let second = Central(address: BluetoothAddress("00:AA:01:02:00:02"))

    /// The sockets, with the centrals connected as `connected` says, and what they report.
    func withSockets(
        connected: Lock<Set<Central>>,
        _ body: (BlueZServerNotifySockets, Lock<[String]>, GATTServerEvents) async throws -> Void
    ) async throws {
        let sockets = BlueZServerNotifySockets(isConnected: { central in connected.withLock { $0.contains(central) } })
        sockets.recoversSocketsClosedByAnotherCentral.withLock { $0 = true }
        let reported = Lock<[String]>([])
        let events = GATTServerEvents(
            connectionChanged: { _ in },
            subscriptionChanged: { central, _, isSubscribed in
                reported.withLock { $0.append("\(central.map { "\($0.address)" } ?? "?") \(isSubscribed)") }
            })
        try await body(sockets, reported, events)
        await sockets.closeAll()
    }

    /// Closes `bluetoothd`'s end of a socket, as `bluetoothd` does.
    func closeTheirEnd(_ descriptor: DBusFileDescriptor) throws {
        _ = close(try #require(descriptor.take()))
    }

    @Test func aSocketClosedWhenAnotherCentralLeftKeepsItsCentralSubscribed() async throws {
        let connected = Lock<Set<Central>>([first, second])
        try await withSockets(connected: connected) { sockets, reported, events in
            let firstEnd = try sockets.acquire(id, central: first, mtu: 23, events: events)
            let secondEnd = try sockets.acquire(id, central: second, mtu: 23, events: events)
            #expect(reported.withLock { $0 } == ["\(first.address) true", "\(second.address) true"])

            // The second central leaves; bluetoothd closes its socket and the first's.
            connected.withLock { _ = $0.remove(second) }
            try closeTheirEnd(secondEnd)
            try closeTheirEnd(firstEnd)
            // Waits for the first central to become an orphan.
            try await waitUntil(timeout: .seconds(20)) {
                sockets.orphans(of: id) == [first]
            }
            #expect(reported.withLock { $0 }.suffix(1) == ["\(second.address) false"])
            #expect(sockets.entries(of: id).isEmpty)

            // It subscribes again: a new socket, no new subscription reported.
            let again = try sockets.acquire(id, central: first, mtu: 23, events: events)
            #expect(sockets.orphans(of: id).isEmpty)
            #expect(sockets.entries(of: id).map(\.central) == [first])
            #expect(reported.withLock { $0 }.count == 3)
            try closeTheirEnd(again)
        }
    }

    @Test func anOrphanLeavingIsReportedByItsDisconnection() async throws {
        let connected = Lock<Set<Central>>([first, second])
        try await withSockets(connected: connected) { sockets, _, events in
            let firstEnd = try sockets.acquire(id, central: first, mtu: 23, events: events)
            let secondEnd = try sockets.acquire(id, central: second, mtu: 23, events: events)
            connected.withLock { _ = $0.remove(second) }
            try closeTheirEnd(firstEnd)
            try closeTheirEnd(secondEnd)
            // Waits for the first central to become an orphan.
            try await waitUntil(timeout: .seconds(20)) {
                sockets.orphans(of: id) == [first]
            }
            #expect(sockets.centralLeft(first) == [id])
            #expect(sockets.orphans(of: id).isEmpty)
        }
    }

    /// The first subscriber's socket closing while it stays connected (it unsubscribed) or as it
    /// leaves is its unsubscription, not a socket closed because of another central.
    @Test(arguments: [false, true])
    func theFirstSubscriberUnsubscribingOrLeavingIsReportedAsAnUnsubscription(leaves: Bool) async throws {
        let connected = Lock<Set<Central>>([first, second])
        try await withSockets(connected: connected) { sockets, reported, events in
            let firstEnd = try sockets.acquire(id, central: first, mtu: 23, events: events)
            let secondEnd = try sockets.acquire(id, central: second, mtu: 23, events: events)
            defer { withExtendedLifetime(secondEnd) {} }
            if leaves { connected.withLock { _ = $0.remove(first) } }
            try closeTheirEnd(firstEnd)
            // Waits for the first central's unsubscription.
            try await waitUntil(timeout: .seconds(20)) {
                reported.withLock { $0 }.contains("\(first.address) false")
            }
            #expect(sockets.orphans(of: id).isEmpty)
            if !leaves { #expect(sockets.entries(of: id).map(\.central) == [second]) }
        }
    }
}
