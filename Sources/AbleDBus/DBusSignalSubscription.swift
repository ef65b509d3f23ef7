import Synchronization

/// A subscription made with ``DBusConnection/subscribe(matching:handler:onEnd:)``.
public final class DBusSignalSubscription: Sendable {
    private let end: Mutex<(@Sendable () -> Void)?>

    init(end: @escaping @Sendable () -> Void) {
        self.end = Mutex(end)
    }

    /// Ends the subscription and removes its match rule; calling it again does nothing.
    public func cancel() {
        end.withLock { end in
            defer { end = nil }
            return end
        }?()
    }

    deinit {
        cancel()
    }
}
