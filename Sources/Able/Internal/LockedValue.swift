import Synchronization

/// A value behind a lock, shared between handlers and tasks.
package final class LockedValue<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    package init(_ value: Value) { mutex = Mutex(value) }
    package var value: Value {
        get { mutex.withLock { $0 } }
        set { mutex.withLock { $0 = newValue } }
    }
    package func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}
