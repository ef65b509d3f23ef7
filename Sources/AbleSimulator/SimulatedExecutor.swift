import AbleIO
import Dispatch

/// The executor a ``SimulatedClock`` runs simulated work on, one job at a time, so that it
/// knows when everything on it waits.
///
/// Jobs run in the order they were enqueued, on a serial dispatch queue. When the last job has
/// run and none is queued, the executor is idle, and it tells the clock, on the same queue: an
/// automatic clock moves time on then. Nothing else runs between the check and the jobs, so
/// whether the simulation has work left never depends on which thread the system runs first.
final class SimulatedExecutor: TaskExecutor, @unchecked Sendable {
    private struct State {
        /// Jobs enqueued and not yet finished.
        var pending = 0
        /// Whether a look for idleness is queued already.
        var isLookQueued = false
        var onIdle: (@Sendable () -> Void)?
    }

    private let queue = DispatchQueue(label: "able.simulated-clock")
    private let state = Lock(State())

    /// Sets what runs, on the executor's queue, whenever it becomes idle or is asked to look.
    func setIdleHandler(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.onIdle = handler }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        state.withLock { $0.pending += 1 }
        queue.async { [self] in
            job.runSynchronously(on: asUnownedTaskExecutor())
            let idle = state.withLock { state -> (@Sendable () -> Void)? in
                state.pending -= 1
                return state.pending == 0 ? state.onIdle : nil
            }
            idle?()
        }
    }

    /// Runs the idle handler on the queue after everything queued now, if the executor is idle
    /// then; when it is not, the handler runs anyway once its last job is done.
    ///
    /// For changes the executor cannot see, such as a sleeper added from a task that runs
    /// elsewhere. Looks asked for while one is queued are one look.
    /// Looks again after `delay` of real time: for work the executor cannot see and whose end
    /// nothing reports.
    func look(after delay: Duration) {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in self?.look() }
    }

    func look() {
        let queueLook = state.withLock { state -> Bool in
            guard !state.isLookQueued else { return false }
            state.isLookQueued = true
            return true
        }
        guard queueLook else { return }
        queue.async { [self] in
            let idle = state.withLock { state -> (@Sendable () -> Void)? in
                state.isLookQueued = false
                return state.pending == 0 ? state.onIdle : nil
            }
            idle?()
        }
    }
}
