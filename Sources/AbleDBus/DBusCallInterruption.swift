import AbleIO

/// A way to fail a method call under way from outside the task that waits for it: for a caller
/// that learns by other means that no reply will come (BlueZ announcing that the link a request
/// went out on is down), without a task or a timer of its own per call.
///
/// A call given one (``DBusConnection/call(destination:path:interface:method:arguments:timeout:interruption:)``)
/// fails with the error passed to ``interrupt(with:)`` if that comes before the reply; a late
/// reply is then dropped, as after a cancellation. Interrupting before the call is sent fails it
/// without sending it; interrupting after the reply does nothing. One interruption serves one call.
package final class DBusCallInterruption: Sendable {
    private enum State {
        case idle
        case armed(@Sendable (any Error) -> Void)
        case interrupted(any Error)
        case done
    }

    private let state = Lock(State.idle)

    package init() {}

    /// Fails the call with `error`, unless it has been answered.
    package func interrupt(with error: any Error) {
        let fail = state.withLock { state -> (@Sendable (any Error) -> Void)? in
            switch state {
            case .idle:
                state = .interrupted(error)
                return nil
            case .armed(let fail):
                state = .done
                return fail
            case .interrupted, .done:
                return nil
            }
        }
        fail?(error)
    }

    /// Installs what fails the call; returns the error instead when the call was interrupted first.
    func arm(_ fail: @escaping @Sendable (any Error) -> Void) -> (any Error)? {
        state.withLock { state in
            switch state {
            case .idle:
                state = .armed(fail)
                return nil
            case .interrupted(let error):
                state = .done
                return error
            case .armed, .done:
                return nil
            }
        }
    }

    /// Lets go of the call, answered or failed: a later ``interrupt(with:)`` does nothing.
    func disarm() {
        state.withLock { $0 = .done }
    }
}
