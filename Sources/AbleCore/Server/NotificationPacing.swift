/// How fast a ``GATTServer`` sends notifications to each central.
///
/// A server that notifies faster than a link carries them does not make the values arrive
/// sooner: they pile up in BlueZ, which sends ATT responses and notifications to a central from one
/// queue, so every request of that central then waits behind the backlog (and BlueZ answers
/// "Unlikely Error" once an answer takes more than 5 s). So Able paces notifications itself: each
/// subscribed central has a token bucket holding up to ``burst`` notifications, refilled at
/// ``rate`` per second. ``GATTServer/notify(_:value:)`` waits until every subscribed central has a
/// token and takes one from each; ``GATTServer/notify(_:value:to:)`` waits for that central's.
/// A notification is never dropped and never queued without bound: the caller is suspended
/// instead.
///
/// The default, 20 per second per central, is one notification per 50 ms, Linux's default
/// maximum connection interval: a rate any link with default parameters carries. Raise it for a
/// link known to be faster (a short connection interval, several packets per connection event).
///
/// Indications are not paced by this value: each waits for its central's confirmation.
public struct NotificationPacing: Sendable, Hashable, CustomStringConvertible {
    /// Notifications per second per central, once the burst is spent.
    public let rate: Int
    /// How many notifications a central may receive at once after a quiet spell.
    public let burst: Int

    /// Paces notifications to `rate` per second per central, allowing `burst` at once.
    ///
    /// - Parameters:
    ///   - rate: Notifications per second per central; at least 1.
    ///   - burst: How many may go at once after a quiet spell; at least 1.
    /// - Returns: The pacing; ``GATTServer/start(on:pacing:definition:)`` refuses a rate or burst
    ///   below 1 with ``BluetoothError/Code/invalidArguments``.
    public static func perSecond(_ rate: Int, burst: Int = 3) -> NotificationPacing {
        NotificationPacing(rate: rate, burst: burst)
    }

    /// 20 notifications per second per central (one per 50 ms), in bursts of up to 3.
    public static let `default` = NotificationPacing.perSecond(20)

    /// The time one token takes to come back.
    package var interval: Duration { .seconds(1) / max(rate, 1) }

    public var description: String { "\(rate)/s (burst \(burst))" }

    func validate() throws {
        guard rate >= 1, burst >= 1 else {
            throw BluetoothError(
                .invalidArguments, message: "notification pacing needs a rate and a burst of at least 1, not \(self)")
        }
    }
}
