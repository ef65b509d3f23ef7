import AbleIO

/// A method call that waits for its turn to be sent: the connection has as many calls awaiting
/// replies as the bus lets it have.
struct WaitingCall {
    /// The call, with one reference owned by this value.
    let message: OpaquePointer
    let destination: String?
    let reply: PendingReply
    /// When the call fails with `NoReply` (`CLOCK_MONOTONIC` nanoseconds), its wait included.
    let deadline: UInt64?
    let timeoutMilliseconds: Int32
}

/// The calls waiting for their turn, first in first out: AbleIO's queue of the socket engine.
typealias WaitingCalls = RingBuffer<WaitingCall>

extension RingBuffer where Element == WaitingCall {
    /// The earliest deadline of a waiting call, if any has one.
    var earliestDeadline: UInt64? { (0..<count).compactMap { self[offset: $0].deadline }.min() }
}

/// One match rule installed in the bus daemon and the subscriptions that share it.
final class MatchRuleUse {
    /// How many subscriptions (and followings of a well-known name) use the rule.
    var references = 1
    /// The `AddMatch` call, which every user of the rule awaits before it counts as installed.
    var installation: Task<Void, any Error>?
}
