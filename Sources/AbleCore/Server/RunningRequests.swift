import AbleIO

/// The read and write handlers of a GATT server that are running, by the central that asked, so
/// that the server can answer them at once when it disconnects that central.
///
/// Abandoning a request answers it with ``ATTError/unlikelyError`` and cancels its handler; what
/// the handler returns after that is dropped. There are two ways to run a handler:
/// - When the backend can answer a request before its handler returns (``RequestAbandonment``;
///   BlueZ's D-Bus replies can), the handler runs in the request's own task, and abandoning it
///   calls the backend's answer, which also cancels that task. No task is made.
/// - Otherwise it runs in a task of its own, started immediately on the caller's thread (so a
///   handler that does not suspend costs a task but no hop), preferring the caller's inherited
///   executor; the request waits for whichever comes first, the handler's answer or
///   ``abandon(_:)``.
///
/// Requests that name no central, stored values, which need no handler, and handlers declared
/// `answering: .immediately`, which answer before anything could abandon them, never come here.
///
/// Why: `bluetoothd` (every version up to at least 5.87, bluez/bluez#2447) keeps a raw pointer to
/// the ATT channel a request came on and answers through it whenever the application answers, or
/// when its own 5 s attribute timeout or the application's unregistration cancels the request.
/// After the link drops that channel is freed, and `bluetoothd` 5.66 was seen to crash in the
/// guest when a server disconnected a central with a read pending and closed. Answering before
/// the server asks BlueZ to drop the link (`Device1.Disconnect` waits 2 s before it does) keeps
/// every answer on a live channel.
final class RunningRequests: Sendable {
    private struct Running {
        var central: BluetoothAddress
        /// Answers the request with ``ATTError/unlikelyError``.
        var abandon: @Sendable () -> Void
        var task: Task<Void, Never>?
    }

    private struct State {
        var running: [UInt64: Running] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Lock(State())

    /// Runs `handler` for a request of `central`, unless the server disconnects that central first.
    ///
    /// - Parameter abandonment: How the backend answers the request and cancels the handler at
    ///   once; then the handler runs here, in the caller's task. Without it the handler runs in a
    ///   task of its own.
    /// - Throws: what the handler throws, or ``ATTError/unlikelyError`` when the request was
    ///   abandoned, whatever the handler returned.
    func run<T: Sendable>(
        for central: Central, abandonment: RequestAbandonment?, _ handler: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        guard let abandonment else { return try await runInTask(for: central, handler) }
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            state.running[state.nextID] = Running(central: central.address, abandon: abandonment.answer)
            return state.nextID
        }
        let result = await Result { try await handler() }
        // Abandoned: the backend has answered, and what the handler returned must change nothing.
        guard state.withLock({ $0.running.removeValue(forKey: id) }) != nil else { throw ATTError.unlikelyError }
        return try result.get()
    }

    private func runInTask<T: Sendable>(for central: Central, _ handler: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
        }
        let state = self.state
        let result = await withTaskCancellationHandler {
            await withUnsafeContinuation { (answer: UnsafeContinuation<Result<T, any Error>, Never>) in
                state.withLock {
                    $0.running[id] = Running(central: central.address) {
                        answer.resume(returning: .failure(ATTError.unlikelyError))
                    }
                }
                // Immediate: a handler that answers without suspending runs here and now, and the
                // request goes on without a hop (the continuation is resumed before it waits).
                let task = Task.immediate(executorPreference: InheritedExecutor.preferred) {
                    let result = await Result { try await handler() }
                    // Only the first of the answer and an abandonment resumes the request.
                    guard state.withLock({ $0.running.removeValue(forKey: id) }) != nil else { return }
                    answer.resume(returning: result)
                }
                // The handler may have answered, or the request been abandoned, already.
                let isRunning = state.withLock { state -> Bool in
                    guard state.running[id] != nil else { return false }
                    state.running[id]?.task = task
                    return true
                }
                if !isRunning { task.cancel() }
            }
        } onCancel: {
            // The request's own task was cancelled (its connection closes): so is the handler's.
            state.withLock { $0.running[id]?.task }?.cancel()
        }
        return try result.get()
    }

    /// Answers every running request of `central` with ``ATTError/unlikelyError`` and cancels
    /// their handlers.
    func abandon(_ central: Central) {
        let abandoned = state.withLock { state -> [Running] in
            let ids = state.running.filter { $0.value.central == central.address }.keys
            return ids.compactMap { state.running.removeValue(forKey: $0) }
        }
        for request in abandoned {
            request.task?.cancel()
            request.abandon()
        }
    }
}

/// How a backend answers a server request at once with ``ATTError/unlikelyError``, before its
/// handler returns, and cancels the handler; what the handler returns afterwards the backend drops.
package struct RequestAbandonment: Sendable {
    let answer: @Sendable () -> Void

    /// - Parameter answer: Answers the request and cancels its handler; called at most once, from
    ///   any thread.
    package init(_ answer: @escaping @Sendable () -> Void) {
        self.answer = answer
    }
}
