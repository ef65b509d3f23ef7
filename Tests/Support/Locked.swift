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

    /// Reads and changes the value in one step (`value += 1` is a read and a separate write).
    @discardableResult
    public func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        mutex.withLock { body(&$0) }
    }
}
