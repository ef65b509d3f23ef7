import AbleDBus
import Synchronization

/// The object that `Benchmarks/C/echo-server.c` serves.
enum EchoServer {
    static let name = "org.example.Bench"
    static let path: DBusObjectPath = "/org/example/Bench"
    static let interface = "org.example.Bench"

    static func check(_ reply: [DBusValue], _ value: Int) throws {
        guard reply.count == 1, try reply[0].decode(UInt64.self) == UInt64(value) else {
            throw BenchmarkFailure("Echo(\(value)) answered \(reply)")
        }
    }
}

// MARK: - On the global executor

/// Calls `Echo` once per index, one call at a time, from a task on the global executor.
nonisolated func sequentialCallsOnGlobalExecutor(_ connection: DBusConnection, _ indices: Range<Int>) async throws {
    for index in indices {
        let reply = try await connection.call(
            destination: EchoServer.name, path: EchoServer.path, interface: EchoServer.interface, method: "Echo",
            arguments: [.uint64(UInt64(index))])
        try EchoServer.check(reply, index)
    }
}

/// Calls `Echo` `count` times with `window` calls in flight: `window` child tasks of a task group
/// on the global executor, each taking the next index when its previous call is answered.
nonisolated func pipelinedCallsOnGlobalExecutor(_ connection: DBusConnection, count: Int, window: Int) async throws {
    let next = Counter()
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<window {
            group.addTask {
                while case let index = next.take(), index < count {
                    let reply = try await connection.call(
                        destination: EchoServer.name, path: EchoServer.path, interface: EchoServer.interface,
                        method: "Echo", arguments: [.uint64(UInt64(index))])
                    try EchoServer.check(reply, index)
                }
            }
        }
        try await group.waitForAll()
    }
}

final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    func take() -> Int { value.add(1, ordering: .relaxed).oldValue }
}

// MARK: - On the connection's executor

/// Runs the loops in an actor that shares the connection's executor, so that a call is sent and
/// its caller resumed on the connection's queue without a hop (the pattern `DBusExecutor` documents).
actor SharedExecutorRunner {
    let connection: DBusConnection
    private var nextIndex = 0
    private var endIndex = 0

    init(_ connection: DBusConnection) {
        self.connection = connection
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        connection.executor.asUnownedSerialExecutor()
    }

    func sequentialCalls(_ indices: Range<Int>) async throws {
        for index in indices {
            let reply = try await connection.call(
                destination: EchoServer.name, path: EchoServer.path, interface: EchoServer.interface, method: "Echo",
                arguments: [.uint64(UInt64(index))])
            try EchoServer.check(reply, index)
        }
    }

    /// `window` workers, each a child task that moves onto this actor at once and stays there.
    func pipelinedCalls(count: Int, window: Int) async throws {
        nextIndex = 0
        endIndex = count
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<window {
                group.addTask { try await self.callWorker() }
            }
            try await group.waitForAll()
        }
    }

    private func callWorker() async throws {
        while nextIndex < endIndex {
            let index = nextIndex
            nextIndex += 1
            let reply = try await connection.call(
                destination: EchoServer.name, path: EchoServer.path, interface: EchoServer.interface, method: "Echo",
                arguments: [.uint64(UInt64(index))])
            try EchoServer.check(reply, index)
        }
    }
}

// MARK: - Commands

func runSequentialCalls(address: String, count: Int, warmup: Int, placement: Placement) async throws -> Measurement {
    let connection = try await DBusConnection.connect(to: .address(address))
    let runner = SharedExecutorRunner(connection)
    func run(_ indices: Range<Int>) async throws {
        switch placement {
        case .global: try await sequentialCallsOnGlobalExecutor(connection, indices)
        case .shared: try await runner.sequentialCalls(indices)
        }
    }
    try await run(0..<warmup)
    let start = Mark.now()
    try await run(0..<count)
    let end = Mark.now()
    await connection.close()
    return Measurement(operations: count, wall: end.wall - start.wall, start: start, end: end)
}

func runPipelinedCalls(
    address: String, count: Int, window: Int, warmup: Int, placement: Placement
) async throws -> Measurement {
    let connection = try await DBusConnection.connect(to: .address(address))
    let runner = SharedExecutorRunner(connection)
    func run(_ count: Int) async throws {
        switch placement {
        case .global: try await pipelinedCallsOnGlobalExecutor(connection, count: count, window: window)
        case .shared: try await runner.pipelinedCalls(count: count, window: window)
        }
    }
    try await run(warmup)
    let start = Mark.now()
    try await run(count)
    let end = Mark.now()
    await connection.close()
    return Measurement(operations: count, wall: end.wall - start.wall, start: start, end: end)
}
