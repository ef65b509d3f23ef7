import AbleStreams

/// Hands signals to a closure, decoded or read in place, until finished.
final class HandlerReceiver: SignalReceiver {
    enum Handler {
        case decoded(@Sendable (DBusSignal) -> Void)
        case inPlace(@Sendable (DBusSignalView) -> Void)
    }

    private let handler: Handler
    private let onEnd: Lock<(@Sendable ((any Error)?) -> Void)?>

    init(handler: Handler, onEnd: @escaping @Sendable ((any Error)?) -> Void) {
        self.handler = handler
        self.onEnd = Lock(onEnd)
    }

    var readsInPlace: Bool {
        if case .inPlace = handler { true } else { false }
    }

    func yield(_ signal: DBusSignal) {
        // A cancelled subscription may still be in the core's table for a moment: deliver nothing.
        guard case .decoded(let handler) = handler, onEnd.withLock({ $0 != nil }) else { return }
        handler(signal)
    }

    func receive(_ view: DBusSignalView) {
        guard case .inPlace(let handler) = handler, onEnd.withLock({ $0 != nil }) else { return }
        handler(view)
    }

    func finish(throwing error: (any Error)?) {
        onEnd.withLock { onEnd in
            defer { onEnd = nil }
            return onEnd
        }?(error)
    }
}
