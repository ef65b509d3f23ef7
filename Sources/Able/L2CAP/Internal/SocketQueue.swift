import Dispatch

/// A serial dispatch queue that the dispatch sources of one socket run on, and that the actor
/// owning the socket uses as its executor, so that its isolated code and the sources' handlers
/// never run at the same time.
final class SocketQueue: SerialExecutor, @unchecked Sendable {
    let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
