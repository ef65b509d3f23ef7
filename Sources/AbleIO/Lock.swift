#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a lock: the one lock type of the whole package.
///
/// Its API is `Synchronization.Mutex`'s (`withLock`, `withLockIfAvailable`), but it is built on
/// a `pthread_mutex_t`, which ThreadSanitizer sees: on Linux `Mutex` is a futex that
/// ThreadSanitizer does not know, so it reports every value a `Mutex` guards correctly as a
/// race. Every lock in Able is a `Lock`, so that choosing another primitive is a change to this
/// file alone.
///
/// The mutex is glibc's adaptive kind (`PTHREAD_MUTEX_ADAPTIVE_NP`): a thread that finds it held
/// spins for a moment before it sleeps in the kernel. Most critical sections in Able are a few
/// dozen instructions (the longest make one system call, as an L2CAP channel's send does to keep
/// concurrent senders in order), so a contended lock is usually free again within the spin, and
/// the futex sleep and wake-up (two system calls and a context switch) are saved: between an
/// L2CAP channel's socket thread and its consumer, half the futex calls and a third of the
/// context switches went, and 244-byte SDUs moved about a fifth faster.
///
/// The mutex and the value live together in one heap object, where they never move: a lock costs
/// one allocation, however many copies of it are made (every copy is the same lock).
/// The lock is not recursive: calling `withLock` again from inside the body deadlocks.
///
/// Keep a closure in a struct rather than as the value itself (`Lock<(() -> Void)?>`): in a debug
/// build, every `withLock` on a bare function-typed value wraps it in one more reabstraction
/// thunk, so the value grows with each access and calling it at last can overflow the stack.
package struct Lock<Value>: @unchecked Sendable {
    /// The value as the buffer's header, the mutex as its one element.
    private final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        deinit {
            _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
        }
    }

    /// What keeps the value and the mutex alive.
    private let storage: Storage
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // The lock gives the value a region of its own, as `Mutex` does: only its holder reaches it.
    nonisolated(unsafe) private let value: UnsafeMutablePointer<Value>

    /// A lock guarding `initialValue`.
    package init(_ initialValue: sending Value) {
        storage = unsafeDowncast(Storage.create(minimumCapacity: 1) { _ in initialValue }, to: Storage.self)
        // A `ManagedBuffer`'s header and elements never move while it lives, and `storage` keeps it.
        (value, mutex) = storage.withUnsafeMutablePointers { ($0, $1) }
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, adaptiveMutexAttributes)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    /// Runs `body` with exclusive access to the value, waiting for the lock first.
    package func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }

    /// Runs `body` with exclusive access to the value if the lock is free; returns `nil` at once
    /// when another thread holds it.
    package func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}

/// The attributes every ``Lock``'s mutex is made with: the adaptive kind (see ``Lock``). Made once
/// (locks are made per request on some paths) and only read afterwards, by any thread.
nonisolated(unsafe) private let adaptiveMutexAttributes: UnsafeMutablePointer<pthread_mutexattr_t> = {
    let attributes = UnsafeMutablePointer<pthread_mutexattr_t>.allocate(capacity: 1)
    attributes.initialize(to: pthread_mutexattr_t())
    pthread_mutexattr_init(attributes)
    pthread_mutexattr_settype(attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
    return attributes
}()
