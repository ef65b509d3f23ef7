package import AbleIO

/// The devices a scan discovers, for `for try await`.
///
/// **Buffering:** the newest 256 discoveries the consumer has not taken yet; when the buffer
/// is full the oldest is dropped and counted in ``droppedCount``.
///
/// **Lifetime:** the scan runs until iteration ends (the loop is left), the iterating task is
/// cancelled, or the stream is discarded, iterated or not; when the last scan of the adapter
/// ends, Able stops discovery in BlueZ. The stream throws ``BluetoothError`` with
/// ``BluetoothError/Code/daemonUnavailable`` when `bluetoothd` leaves the bus (it stopped or
/// restarted), and with ``BluetoothError/Code/notAvailable`` when the adapter alone goes away.
///
/// Cancelling the task that iterates ends the stream: `next()` returns `nil` once the values
/// already buffered are taken, and the work behind the stream stops. Here the work is the scan:
/// it ends, and discovery stops (`StopDiscovery`) if no other scan of the adapter runs.
public struct ScanStream: AsyncSequence, Sendable {
    public typealias Element = Discovery

    /// The producing end, fed by a backend.
    package typealias Continuation = DeliveryBuffer<Discovery>

    let buffer: DeliveryBuffer<Discovery>
    let lifetime: IterationLifetime<Discovery>
    /// Sleeps on the adapter backend's clock, for ``first(timeout:)``.
    let sleep: @Sendable (Duration) async throws -> Void

    static func make(sleep: @escaping @Sendable (Duration) async throws -> Void) -> (ScanStream, Continuation) {
        let buffer = DeliveryBuffer<Discovery>(limit: 256, policy: .dropOldest)
        return (ScanStream(buffer: buffer, lifetime: IterationLifetime(buffer), sleep: sleep), buffer)
    }

    /// How many discoveries were dropped because the consumer fell behind.
    public var droppedCount: Int { buffer.droppedCount }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer, stream: lifetime, lifetime: lifetime.forIterator())
    }

    /// The iterator of a scan; not `Sendable`. When it goes away (the loop ended), the scan ends.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: DeliveryBuffer<Discovery>
        /// Keeps the stream going while this iterator lives, even if the stream value is gone.
        let stream: IterationLifetime<Discovery>
        let lifetime: IterationLifetime<Discovery>

        public mutating func next() async throws -> Discovery? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> Discovery? {
            try await buffer.next(isolation: actor)
        }
    }

    /// The first discovery, or an error when none comes within `timeout`; the scan then ends.
    ///
    /// The timeout runs on the adapter's clock: the wall clock on BlueZ, the simulated radio's
    /// clock on a simulated adapter.
    ///
    /// ```swift
    /// let device = try await adapter.scan(ScanFilter(serviceUUIDs: [.heartRate])).first(timeout: .seconds(3))
    /// ```
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/timeout`` when nothing was found in time.
    public func first(timeout: Duration) async throws -> Discovery {
        enum Outcome: Sendable {
            case discovery(Discovery?)
            case timeout
        }
        // Whichever of the discovery and the timeout happens first claims the result at once,
        // whenever its task gets to finish: on a loaded machine (and on a simulated clock that
        // has moved on) the loser's task may finish first.
        // A discovery that waits in the stream already came before now: it is the first, however
        // little time is left, and no race with the timeout may lose it.
        if let discovery = buffer.nextIfBuffered() {
            // The scan ends as it does when a loop ends: with the end of an iterator.
            withExtendedLifetime(makeAsyncIterator()) {}
            return discovery
        }
        let winner = Lock<Outcome?>(nil)
        func claim(_ outcome: Outcome) -> Bool {
            winner.withLock { winner in
                guard winner == nil else { return false }
                winner = outcome
                return true
            }
        }
        return try await withThrowingTaskGroup(of: Outcome.self) { group in
            group.addTask {
                let iterator = makeAsyncIterator()
                let discovery = try await iterator.buffer.nextHeld()
                if let discovery { _ = claim(.discovery(discovery)) }
                return .discovery(discovery)
            }
            group.addTask {
                try await sleep(timeout)
                _ = claim(.timeout)
                return .timeout
            }
            defer { group.cancelAll() }
            do {
                while let outcome = try await group.next() {
                    switch (outcome, winner.withLock { $0 }) {
                    case (.discovery(let discovery?), .discovery?):
                        // Only now, with the timeout cancelled, is the discovery taken: a simulated
                        // clock holds time still while a scan holds a discovery not taken.
                        group.cancelAll()
                        buffer.releaseHeld()
                        return discovery
                    case (.discovery(_?), .timeout?):
                        buffer.releaseHeld()  // taken too late: the timeout won
                        continue
                    case (.discovery(nil), _), (.timeout, .timeout?): break  // the scan ended, or time is up
                    default: continue  // the loser finished first: wait for the winner
                    }
                    break
                }
            } catch {
                // Cancelled (or the scan failed): a discovery taken meanwhile is let go too.
                group.cancelAll()
                while let outcome = try? await group.next() {
                    if case .discovery(_?) = outcome { buffer.releaseHeld() }
                }
                throw error
            }
            throw BluetoothError(.timeout, message: "no device matched the scan within \(timeout)")
        }
    }
}
