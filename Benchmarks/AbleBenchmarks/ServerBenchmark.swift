import Able
import AbleBlueZ
import AbleDBus
import AbleIO
import Synchronization

/// Counts the reads a server's handler answers and marks where the measured ones begin and end.
final class ReadCounter: Sendable {
    private let answered = Atomic<Int>(0)
    private let marks = Lock<(start: Mark?, end: Mark?)>((nil, nil))
    private let warmup: Int
    private let total: Int
    private let done: AsyncStream<Void>.Continuation
    let finished: AsyncStream<Void>

    init(warmup: Int, count: Int) {
        self.warmup = warmup
        self.total = warmup + count
        (finished, done) = AsyncStream<Void>.makeStream()
        if warmup == 0 { marks.withLock { $0.start = Mark.now() } }
    }

    /// Called by the read handler once per request.
    func note() {
        let answered = answered.add(1, ordering: .relaxed).newValue
        if answered == warmup {
            let mark = Mark.now()
            marks.withLock { $0.start = mark }
        } else if answered == total {
            let mark = Mark.now()
            marks.withLock { $0.end = mark }
            done.yield()
            done.finish()
        }
    }

    var startAndEnd: (start: Mark, end: Mark)? {
        marks.withLock { marks in marks.start.flatMap { start in marks.end.map { (start, $0) } } }
    }
}

/// `server-readvalue`: an Able GATT server with one readable characteristic whose `OnRead` handler
/// answers 20 bytes immediately (no task), registered with the fake BlueZ, which then calls
/// `ReadValue` `warmup + count` times. Reports the CPU time this process spent answering the last
/// `count` of them.
func runServerReadValue(address: String, count: Int, warmup: Int) async throws -> Measurement {
    let connection = try await DBusConnection.connect(to: .address(address))
    let adapter = try await Adapter.bluez(named: FakeBlueZShape.adapter, on: connection)
    // The handler runs before its reply is sent: close only once the fake, having every answer,
    // has left the bus, or the last replies could be overtaken by UnregisterApplication.
    let owners = try await connection.nameOwnerChanges(of: "org.bluez")
    let counter = ReadCounter(warmup: warmup, count: count)
    let value = (0..<UInt8(FakeBlueZShape.valueLength)).map { $0 }
    let server = try await GATTServer.start(on: adapter) {
        Service(FakeBlueZShape.service) {
            Characteristic(FakeBlueZShape.characteristic, properties: .read)
        }
        OnRead(FakeBlueZShape.characteristicID, answering: .immediately) { _ in
            counter.note()
            return value
        }
    }
    for await _ in counter.finished { break }
    guard let (start, end) = counter.startAndEnd else { throw BenchmarkFailure("the reads did not complete") }
    let left = Task { for try await change in owners where change.newOwner == nil { return } }
    let deadline = Task {
        try await Task.sleep(for: .seconds(10))
        left.cancel()
    }
    _ = try? await left.value
    deadline.cancel()
    await server.close()
    await connection.close()
    return Measurement(operations: count, wall: end.wall - start.wall, start: start, end: end)
}
