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

/// The calls waiting for their turn, first in first out: an array read from a moving head, so
/// that taking the first is O(1); the space before the head is reclaimed once it is half the array.
struct WaitingCalls {
    private var calls: [WaitingCall] = []
    private var head = 0

    var count: Int { calls.count - head }
    var isEmpty: Bool { head == calls.count }

    /// The earliest deadline of a waiting call, if any has one.
    var earliestDeadline: UInt64? { calls[head...].compactMap(\.deadline).min() }

    mutating func append(_ call: WaitingCall) {
        calls.append(call)
    }

    /// Puts a call taken with ``popFirst()`` back at the front.
    mutating func prepend(_ call: WaitingCall) {
        if head > 0 {
            head -= 1
            calls[head] = call
        } else {
            calls.insert(call, at: 0)
        }
    }

    mutating func popFirst() -> WaitingCall? {
        guard head < calls.count else { return nil }
        let call = calls[head]
        head += 1
        if head == calls.count {
            calls.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= calls.count {
            calls.removeFirst(head)
            head = 0
        }
        return call
    }

    /// Takes out the calls that satisfy `predicate`, keeping the others in order.
    mutating func remove(where predicate: (WaitingCall) -> Bool) -> [WaitingCall] {
        guard !isEmpty else { return [] }
        var removed: [WaitingCall] = []
        var kept: [WaitingCall] = []
        kept.reserveCapacity(count)
        for call in calls[head...] {
            if predicate(call) { removed.append(call) } else { kept.append(call) }
        }
        guard !removed.isEmpty else { return [] }
        calls = kept
        head = 0
        return removed
    }

    /// Takes out every call.
    mutating func removeAll() -> [WaitingCall] {
        let all = Array(calls[head...])
        calls.removeAll()
        head = 0
        return all
    }
}

/// One match rule installed in the bus daemon and the subscriptions that share it.
final class MatchRuleUse {
    /// How many subscriptions (and followings of a well-known name) use the rule.
    var references = 1
    /// The `AddMatch` call, which every user of the rule awaits before it counts as installed.
    var installation: Task<Void, any Error>?
}
