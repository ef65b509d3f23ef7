import Synchronization

/// The devices a scan discovers, for `for try await`.
///
/// **Buffering:** the newest 256 discoveries the consumer has not taken yet; when the buffer
/// is full the oldest is dropped and counted in ``droppedCount``.
///
/// **Lifetime:** the scan runs until iteration ends (the loop is left), the iterating task is
/// cancelled, or the stream is discarded, iterated or not; when the last scan of the adapter ends, Able stops discovery in BlueZ.
/// The stream throws ``BluetoothError`` with ``BluetoothError/Code/daemonUnavailable`` when
/// `bluetoothd` leaves the bus (it stopped or restarted), and with
/// ``BluetoothError/Code/notAvailable`` when the adapter alone goes away.
public struct ScanStream: AsyncSequence, Sendable {
    public typealias Element = Discovery
    typealias Base = AsyncThrowingStream<Discovery, any Error>

    /// The producing end, fed by a backend.
    package struct Continuation: Sendable {
        let base: Base.Continuation
        let counter: DropCounter

        package func yield(_ discovery: Discovery) {
            if case .dropped = base.yield(discovery) { counter.increment() }
        }

        package func finish(throwing error: (any Error)? = nil) { base.finish(throwing: error) }

        package func onTermination(_ handler: @escaping @Sendable () -> Void) {
            base.onTermination = { _ in handler() }
        }
    }

    let base: Base
    let lifetime: IterationLifetime<Discovery>
    let counter: DropCounter
    /// Sleeps on the adapter backend's clock, for ``first(timeout:)``.
    let sleep: @Sendable (Duration) async throws -> Void

    static func make(sleep: @escaping @Sendable (Duration) async throws -> Void) -> (ScanStream, Continuation) {
        let (base, continuation) = Base.makeStream(bufferingPolicy: .bufferingNewest(256))
        let counter = DropCounter()
        return (
            ScanStream(base: base, lifetime: IterationLifetime(continuation), counter: counter, sleep: sleep),
            Continuation(base: continuation, counter: counter)
        )
    }

    /// How many discoveries were dropped because the consumer fell behind.
    public var droppedCount: Int { counter.value }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), stream: lifetime, lifetime: lifetime.forIterator())
    }

    /// The iterator of a scan; not `Sendable`. When it goes away (the loop ended), the scan ends.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        /// Keeps the stream going while this iterator lives, even if the stream value is gone.
        let stream: IterationLifetime<Discovery>
        let lifetime: IterationLifetime<Discovery>
        public mutating func next() async throws -> Discovery? { try await base.next() }
    }

    /// The first discovery, or an error when none comes within `timeout`; the scan then ends.
    ///
    /// The timeout runs on the adapter's clock: the wall clock on BlueZ, the simulated radio's
    /// clock on a simulated adapter.
    ///
    /// ```swift
    /// let device = try await adapter.scan(ScanFilter(serviceUUIDs: [heartRate])).first(timeout: .seconds(3))
    /// ```
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/timeout`` when nothing was found in time.
    public func first(timeout: Duration) async throws -> Discovery {
        try await withThrowingTaskGroup(of: Discovery?.self) { group in
            group.addTask {
                var iterator = makeAsyncIterator()
                return try await iterator.next()
            }
            group.addTask {
                try await sleep(timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let discovery = first else {
                throw BluetoothError(.timeout, message: "no device matched the scan within \(timeout)")
            }
            return discovery
        }
    }
}

/// Counts what a full buffer dropped.
final class DropCounter: Sendable {
    private let count = Atomic<Int>(0)
    var value: Int { count.load(ordering: .relaxed) }
    func increment() { count.add(1, ordering: .relaxed) }
}

/// Ends a stream when the last copy of the stream value goes away (even if it was never
/// iterated), and, through ``forIterator()``, when an iterator goes away, so that leaving a
/// `for try await` loop ends the work behind the stream while the stream is still referenced.
final class IterationLifetime<Element: Sendable>: Sendable {
    private let continuation: AsyncThrowingStream<Element, any Error>.Continuation

    init(_ continuation: AsyncThrowingStream<Element, any Error>.Continuation) {
        self.continuation = continuation
    }

    /// A lifetime of its own for one iterator.
    func forIterator() -> IterationLifetime { IterationLifetime(continuation) }

    deinit {
        continuation.finish()
    }
}
