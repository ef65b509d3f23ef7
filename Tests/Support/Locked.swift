import AbleIO

/// A value shared between a test and the handlers it exports.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Lock<Value>

    public init(_ value: Value) {
        mutex = Lock(value)
    }

    public var value: Value {
        get { mutex.withLock { $0 } }
        set { mutex.withLock { $0 = newValue } }
    }
}
