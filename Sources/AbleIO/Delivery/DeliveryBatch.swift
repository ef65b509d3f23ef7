#if canImport(Glibc)
    import Glibc
#endif

/// The values that one run of a producer hands to ``DeliveryBuffer``s: their waiting consumers
/// are woken once, when the batch ends, rather than once per value.
///
/// A producer that receives values in bursts (everything one read from a socket brought) runs
/// each burst as a batch; a wake-up costs a thread switch, so a burst costs one.
///
/// A batch belongs to the thread that runs it, found through a thread-specific key rather than a
/// task-local value: the producers that run batches are plain threads (dispatch queues), and a
/// key costs a load per yield. Batches do not nest: an inner ``run(isolation:_:)`` joins the outer one.
///
/// Its arrays are used by the thread that runs the batch only, and no access to them is open while
/// a buffer is woken (which only resumes a continuation): so they go without the runtime's
/// exclusivity check of each access, which a paced value would pay in every run.
package final class DeliveryBatch {
    @exclusivity(unchecked) private var deferred: [any DeferredWake] = []
    /// The buffers being woken at the end of a run: `deferred`'s storage is swapped in here, so
    /// that both arrays keep their capacity from run to run. (Copying `deferred` and emptying it
    /// with `removeAll(keepingCapacity:)`, as this did, allocates a new buffer in every run that
    /// deferred a wake-up, because the copy still holds the old one: one allocation per paced
    /// notification.)
    @exclusivity(unchecked) private var waking: [any DeferredWake] = []

    /// ``key``, read once: a `static let` is reached through `swift_once`, a call on every
    /// access, and a run would make three.
    private let key = DeliveryBatch.key

    package init() {}

    /// The batch running on this thread, if any.
    package static var current: DeliveryBatch? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<DeliveryBatch>.fromOpaque(pointer).takeUnretainedValue()
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key for delivery batches")
        return key
    }()

    /// Runs `body` as this batch, then wakes the consumers it held back.
    package func run<Result>(_ body: () throws -> Result) rethrows -> Result {
        guard begin() else { return try body() }
        defer { end() }
        return try body()
    }

    /// Starts this batch on the calling thread, for a producer that decides partway through a run
    /// that its values are a burst; returns `false`, and starts nothing, if a batch already runs
    /// on this thread (the values join it). A `true` must be followed by ``end()`` on the same
    /// thread.
    package func begin() -> Bool {
        guard pthread_getspecific(key) == nil else { return false }
        pthread_setspecific(key, Unmanaged.passUnretained(self).toOpaque())
        return true
    }

    /// Ends the batch ``begin()`` started, waking the consumers it held back.
    package func end() {
        pthread_setspecific(key, nil)
        if !deferred.isEmpty {
            swap(&deferred, &waking)
            for buffer in waking { buffer.endBatch() }
            waking.removeAll(keepingCapacity: true)
        }
    }

    /// Wakes `buffer`'s consumer when the batch ends; on the batch's thread.
    func `defer`(_ buffer: some DeferredWake) {
        deferred.append(buffer)
    }
}

/// A buffer whose consumer's wake-up a batch held back.
protocol DeferredWake: AnyObject {
    /// Wakes the consumer, unless something woke it meanwhile.
    func endBatch()
}
