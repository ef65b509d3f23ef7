import AbleIO

/// A subscription made with ``DBusConnection/subscribe(matching:handler:onEnd:)``.
public final class DBusSignalSubscription: Sendable {
    private let end: Lock<EndHandler<Void>?>

    init(end: @escaping @Sendable () -> Void) {
        self.end = Lock(EndHandler(call: end))
    }

    /// Ends the subscription and removes its match rule; calling it again does nothing.
    public func cancel() {
        end.withLock { end in
            defer { end = nil }
            return end
        }?.call(())
    }

    deinit {
        cancel()
    }
}
