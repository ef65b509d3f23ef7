import AbleCore
import AbleDBus
import AbleIO

/// The GATT requests under way, by device, for failing those BlueZ never answers after their
/// link went down: one list for the system, which the system's one listener of the object tree
/// serves, so that a request costs a registration in it and nothing else while the link is up.
///
/// BlueZ 5.82 never answers a request whose link drops while the request waits for the pairing
/// it started (see ``BlueZPeripheralBackend``); a request still unanswered ``grace`` after BlueZ
/// announced its device's link down fails with ``BluetoothError/Code/notConnected``.
final class BlueZLinkLoss: Sendable {
    private struct Request {
        let device: DBusObjectPath
        let interruption: DBusCallInterruption
    }

    private struct State {
        var nextID: UInt64 = 0
        var requests: [UInt64: Request] = [:]
    }

    private let state = Lock(State())
    /// How long after BlueZ announces a link down its unanswered requests fail.
    let grace: Duration

    init(grace: Duration = BlueZPeripheralBackend.unansweredGrace) {
        self.grace = grace
    }

    /// Adds a request to `device` that `interruption` fails; returns its ID for ``remove(_:)``.
    func add(_ interruption: DBusCallInterruption, device: DBusObjectPath) -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            state.requests[state.nextID] = Request(device: device, interruption: interruption)
            return state.nextID
        }
    }

    /// Removes a request, answered or failed.
    func remove(_ id: UInt64) {
        state.withLock { _ = $0.requests.removeValue(forKey: id) }
    }

    /// BlueZ announced the link of `device` down (or, for `nil`, left the bus): the requests to it
    /// listed now fail after ``grace`` unless answered by then. One timer per announcement, none
    /// when no request is under way.
    func linkWentDown(_ device: DBusObjectPath?) {
        let interruptions = state.withLock { state in
            state.requests.values.filter { device == nil || $0.device == device }.map(\.interruption)
        }
        guard !interruptions.isEmpty else { return }
        let grace = self.grace
        Task {
            try? await Task.sleep(for: grace)
            let error = BluetoothError(
                .notConnected, message: "BlueZ did not answer the request after the link went down")
            for interruption in interruptions { interruption.interrupt(with: error) }
        }
    }
}
