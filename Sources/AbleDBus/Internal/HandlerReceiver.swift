import AbleIO
import Synchronization

/// Hands signals to a closure, decoded or read in place, until finished.
package final class HandlerReceiver: SignalReceiver {
    package enum Handler {
        case decoded(@Sendable (DBusSignal) -> Void)
        case inPlace(@Sendable (DBusSignalView) -> Void)
    }

    private let handler: Handler
    /// Called once, by the first ``finish(throwing:)``.
    private let onEnd: Lock<EndHandler<(any Error)?>?>
    /// Every signal reads this, to deliver nothing once the subscription ended: one atomic load,
    /// where taking ``onEnd``'s lock cost a lock and an unlock of a mutex per signal.
    private let hasEnded = Atomic(false)

    package init(handler: Handler, onEnd: @escaping @Sendable ((any Error)?) -> Void) {
        self.handler = handler
        self.onEnd = Lock(EndHandler(call: onEnd))
    }

    var readsInPlace: Bool {
        if case .inPlace = handler { true } else { false }
    }

    package func yield(_ signal: DBusSignal) {
        // A cancelled subscription may still be in the core's table for a moment: deliver nothing.
        guard case .decoded(let handler) = handler, !hasEnded.load(ordering: .acquiring) else { return }
        handler(signal)
    }

    func receive(_ view: DBusSignalView) {
        guard case .inPlace(let handler) = handler, !hasEnded.load(ordering: .acquiring) else { return }
        handler(view)
    }

    package func finish(throwing error: (any Error)?) {
        hasEnded.store(true, ordering: .releasing)
        onEnd.withLock { onEnd in
            defer { onEnd = nil }
            return onEnd
        }?.call(error)
    }
}

/// A closure as a ``Lock``'s value, wrapped in a struct. Without optimisation (a debug build)
/// Swift reabstracts a bare function-typed value on every `withLock`, and each access wrapped it in
/// one more thunk: 96 bytes for each signal a subscription received, and a stack overflow when the
/// end finally called through them all. A struct keeps its closure as it is.
struct EndHandler<Argument>: Sendable {
    let call: @Sendable (Argument) -> Void
}
