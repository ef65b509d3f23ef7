package import Dispatch

/// A serial dispatch queue that the dispatch sources of one socket run on, and that the actor
/// owning the socket uses as its executor, so that its isolated code and the sources' handlers
/// never run at the same time.
package final class SocketQueue: SerialExecutor, @unchecked Sendable {
    package let queue: DispatchQueue

    package init(label: String) {
        queue = DispatchQueue(label: label)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    package func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
