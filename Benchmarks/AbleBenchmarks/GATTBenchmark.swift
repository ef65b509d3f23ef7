import Able
import AbleIO
import Foundation
import Synchronization

// `Scripts/bench gatt`: GATT data through real bluetoothd in the QEMU guest. `gatt-server` is Able's
// server on one adapter (hci1); `gatt-central` is Able's central on another (hci0), which measures
// each path in turn and runs `Benchmarks/C/gatt-reference.c` for the C figures, on the same
// connection. The server counts what arrives and answers for it through a control characteristic.

/// The benchmark server's database.
enum GATTBenchShape {
    static let service: BluetoothUUID = "ab1e0101-5a3c-4c8e-9d1f-7b2e4c6a8d00"
    /// Takes writes with and without response, each value starting with its index.
    static let sink: BluetoothUUID = "ab1e0102-5a3c-4c8e-9d1f-7b2e4c6a8d00"
    /// Notifies the values the control characteristic asks for.
    static let stream: BluetoothUUID = "ab1e0103-5a3c-4c8e-9d1f-7b2e4c6a8d00"
    /// Written: `[0, size (2 bytes LE)]` forgets what the sink received and expects values of `size`
    /// bytes from then on; `[1, count (4 bytes LE), size (2 bytes LE)]`
    /// makes the server notify `count` values of `size` bytes on `stream`. Read: `ServerStats`.
    static let control: BluetoothUUID = "ab1e0104-5a3c-4c8e-9d1f-7b2e4c6a8d00"
    /// The index of a value that only makes the central acquire its socket; the server ignores it.
    static let warmUpIndex = 0xFFFF_FFFF
    /// How long the server waits after a write that asks for notifications before it sends the
    /// first, so that bluetoothd has taken the write's answer (see `runGATTServer`). Every path's
    /// wall time includes it alike.
    static let notificationDelay = Duration.milliseconds(500)

    static let sinkID = CharacteristicID(sink, service: service)
    static let streamID = CharacteristicID(stream, service: service)
    static let controlID = CharacteristicID(control, service: service)

    /// A value of `size` bytes carrying `index` in its first 4 bytes (little-endian), then 0xA5.
    static func value(index: Int, size: Int) -> [UInt8] {
        (0..<size).map { byte in byte < 4 ? UInt8(truncatingIfNeeded: index >> (8 * byte)) : 0xA5 }
    }

    static func index(of value: [UInt8]) -> Int? {
        guard value.count >= 4 else { return nil }
        return Int(value[0]) | Int(value[1]) << 8 | Int(value[2]) << 16 | Int(value[3]) << 24
    }
}

/// What the server's sink received since the last reset, and the server's notifying.
struct ServerStats {
    /// Values received, duplicates included.
    var received = 0
    /// Distinct indexes received.
    var distinct = 0
    /// Values whose index was lower than one received before them.
    var outOfOrder = 0
    /// Values not as sent: of another length than expected, or with other bytes after the index.
    var altered = 0
    /// `CLOCK_MONOTONIC` seconds of the first and the last value received (the guest's clock,
    /// which the central and the C reference share).
    var first = 0.0
    var last = 0.0
    /// Whether the server is still sending the notifications it was asked for.
    var notifying = false

    var bytes: [UInt8] {
        func le(_ value: UInt64, _ count: Int) -> [UInt8] {
            (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
        }
        // Joined rather than added with `+`: Swift 6.2's type checker gives up on the sum.
        let fields: [[UInt8]] = [
            le(UInt64(received), 4), le(UInt64(distinct), 4), le(UInt64(outOfOrder), 4), le(UInt64(altered), 4),
            le(first.bitPattern, 8), le(last.bitPattern, 8), [notifying ? 1 : 0],
        ]
        return Array(fields.joined())
    }

    init() {}

    init(_ bytes: [UInt8]) throws {
        guard bytes.count == 33 else { throw BenchmarkFailure("the server's stats are \(bytes.count) bytes, not 33") }
        func le(_ offset: Int, _ count: Int) -> UInt64 {
            (0..<count).reduce(0) { $0 | UInt64(bytes[offset + $1]) << (8 * $1) }
        }
        received = Int(le(0, 4))
        distinct = Int(le(4, 4))
        outOfOrder = Int(le(8, 4))
        altered = Int(le(12, 4))
        first = Double(bitPattern: le(16, 8))
        last = Double(bitPattern: le(24, 8))
        notifying = bytes[32] != 0
    }
}

/// The server's record of the sink's values.
private struct Arrivals {
    var stats = ServerStats()
    var seen = Set<Int>()
    var highest = -1
    var size = 0

    mutating func note(_ value: [UInt8]) {
        guard let index = GATTBenchShape.index(of: value), index != GATTBenchShape.warmUpIndex else { return }
        if value != GATTBenchShape.value(index: index, size: size) { stats.altered += 1 }
        let now = monotonicSeconds()
        if stats.received == 0 { stats.first = now }
        stats.last = now
        stats.received += 1
        if seen.insert(index).inserted { stats.distinct += 1 }
        if index < highest { stats.outOfOrder += 1 }
        highest = max(highest, index)
    }
}

/// `gatt-server ADAPTER`: serves `GATTBenchShape` on the adapter and advertises its service until
/// the process is killed. Prints READY once advertising.
func runGATTServer(adapter name: String) async throws -> Measurement? {
    let arrivals = Lock(Arrivals())
    let notifying = Lock(false)
    let serverBox = Lock<GATTServer?>(nil)
    let sink = CharacteristicID(GATTBenchShape.sink, service: GATTBenchShape.service)
    let control = CharacteristicID(GATTBenchShape.control, service: GATTBenchShape.service)
    let definition = GATTServerDefinition {
        Service(GATTBenchShape.service) {
            Characteristic(GATTBenchShape.sink, properties: [.write, .writeWithoutResponse])
            Characteristic(GATTBenchShape.stream, properties: [.notify])
            Characteristic(GATTBenchShape.control, properties: [.read, .write])
        }
        OnWrite(sink, answering: .immediately) { request in
            arrivals.withLock { $0.note(request.value) }
            return .accept
        }
        OnRead(control, answering: .immediately) { _ in
            var stats = arrivals.withLock { $0.stats }
            stats.notifying = notifying.withLock { $0 }
            return stats.bytes
        }
        OnWrite(control, answering: .immediately) { request in
            let value = request.value
            switch value.first {
            case 0 where value.count == 3:
                arrivals.withLock { $0 = Arrivals(size: Int(value[1]) | Int(value[2]) << 8) }
            case 1 where value.count == 7:
                let count = Int(value[1]) | Int(value[2]) << 8 | Int(value[3]) << 16 | Int(value[4]) << 24
                let size = Int(value[5]) | Int(value[6]) << 8
                guard let server = serverBox.withLock({ $0 }), size >= 4 else { throw ATTError.valueNotAllowed }
                notifying.withLock { $0 = true }
                Task {
                    defer { notifying.withLock { $0 = false } }
                    // This write's answer first. bluetoothd dispatches the D-Bus messages it
                    // receives from an idle callback (gdbus/mainloop.c, g_idle_add), which never
                    // runs while a notification socket at full pace keeps its main loop busy: an
                    // answer that comes after the first notifications waits past gatt-db's 5-s
                    // limit, and the central gets ATT 0x0E (Unlikely Error).
                    try? await Task.sleep(for: GATTBenchShape.notificationDelay)
                    let stream = CharacteristicID(GATTBenchShape.stream, service: GATTBenchShape.service)
                    for index in 0..<count {
                        do {
                            try await server.notify(stream, value: GATTBenchShape.value(index: index, size: size))
                        } catch {
                            printAndFlush("notify \(index) of \(count) failed: \(error)")
                            return
                        }
                    }
                }
            default:
                throw ATTError.valueNotAllowed
            }
            return .accept
        }
    }
    let adapter = try await Adapter.named(name)
    // The benchmark measures the central, so the server notifies as fast as the link takes the
    // values, not at the default pace that keeps a server's requests answered.
    let server = try await GATTServer.start(
        on: adapter, pacing: .perSecond(1_000, burst: 64), definition: definition)
    serverBox.withLock { $0 = server }
    let advertising = try await adapter.startAdvertising(
        Advertisement(localName: "able-bench", serviceUUIDs: [GATTBenchShape.service]))
    printAndFlush("READY")
    while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
    await advertising.stop()
    await server.close()
    return nil
}

/// One path's figures.
private struct PathResult {
    var rate: Double
    /// Microseconds of the measured process's CPU per value.
    var cpu: Double
    var received: Int
    var distinct: Int
    var outOfOrder: Int
    var altered = 0
    /// For a receiver whose figure spans the values after the first: the microseconds of CPU from
    /// the request to the first value.
    var setup: Double?

    /// Whether every one of `count` values arrived, unaltered, none twice.
    func isComplete(_ count: Int) -> Bool { received == count && distinct == count && altered == 0 }

    func describe(_ count: Int, unit: String) -> String {
        "\(fixed(rate, 1)) \(unit)s/s, \(fixed(cpu, 1)) us/\(unit); \(received) of \(count) arrived "
            + "(\(distinct) distinct), \(outOfOrder) out of order, \(altered) altered"
            + (setup.map { "; \(fixed($0, 0)) us of CPU from the request to the first" } ?? "")
    }
}

extension PathResult {
    /// The median rate and the median CPU of several runs of one path (each median on its own),
    /// with the fewest values any run received.
    init(medianOf runs: [PathResult]) {
        rate = median(runs.map(\.rate))
        cpu = median(runs.map(\.cpu))
        received = runs.map(\.received).min() ?? 0
        distinct = runs.map(\.distinct).min() ?? 0
        outOfOrder = runs.map(\.outOfOrder).max() ?? 0
        altered = runs.map(\.altered).max() ?? 0
        setup = runs.compactMap(\.setup).isEmpty ? nil : median(runs.compactMap(\.setup))
    }
}

/// What a C reference run printed.
private struct ReferenceOutput {
    var start: Double
    /// What the rate and the CPU are counted over: the values written, or those read after the first.
    var operations: Int
    var wall: Double
    var cpu: Double
    /// A reader's CPU, in microseconds, from the request to the first value.
    var setup: Double?
    var lost: Int
    var reordered: Int
    var mtu: Int

    init(_ output: String, count: Int) throws {
        var fields: [String: String] = [:]
        for line in output.split(separator: "\n") {
            for pair in line.split(separator: " ") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
            }
        }
        func number(_ key: String) throws -> Double {
            guard let value = fields[key].flatMap(Double.init) else {
                throw BenchmarkFailure("the C reference printed no \(key): \(output)")
            }
            return value
        }
        start = try number("start")
        operations = Int(try number("ops"))
        wall = try number("wall")
        cpu = (try number("user") + number("sys")) * 1e6 / Double(max(operations, 1))
        setup = fields["setup"].flatMap(Double.init).map { $0 * 1e6 }
        lost = Int(try number("lost"))
        reordered = Int(try number("reordered"))
        mtu = Int(try number("mtu"))
    }
}

/// Runs a C reference program to its end and returns what it printed.
private func runReference(_ path: String, _ arguments: [String]) async throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw BenchmarkFailure("\(path) \(arguments.joined(separator: " ")) failed: \(text)")
    }
    return text
}

/// `gatt-central ADAPTER COUNT LARGE_COUNT NOTIFICATIONS ROUNDS REFERENCE`: finds the benchmark
/// server, connects, and measures: writes without response of 20 bytes (COUNT) and of the largest
/// size the write socket's MTU allows (LARGE_COUNT) through Able's `AcquireWrite` socket, Able's
/// D-Bus `WriteValue` and the C reference, in each of ROUNDS rounds; then, in each of ROUNDS rounds,
/// NOTIFICATIONS notifications of 20 bytes through Able's `AcquireNotify` socket, Able's
/// `PropertiesChanged` and the C reference, the figures being the rounds' medians. Prints
/// SCANNING once scanning (the server must start advertising after that: the emulated controllers
/// report an advertisement once per scan), then the figures.
func runGATTCentral(
    adapter name: String, count: Int, largeCount: Int, notifications: Int, rounds: Int, reference: String
) async throws -> Measurement? {
    let adapter = try await Adapter.named(name)
    let scan = try await adapter.scan(ScanFilter(serviceUUIDs: [GATTBenchShape.service]))
    printAndFlush("SCANNING")
    let discovery = try await scan.first(timeout: .seconds(60))
    try await adapter.withConnection(to: discovery, timeout: .seconds(30)) { peripheral in
        let sink = try await peripheral.characteristic(GATTBenchShape.sinkID)
        // Acquire the write socket, which tells its MTU, and learn the link's pace.
        try await peripheral.write(
            GATTBenchShape.value(index: GATTBenchShape.warmUpIndex, size: 20), to: GATTBenchShape.sinkID,
            type: .withoutResponse)
        let largest = await peripheral.maximumWriteLength(for: sink, type: .withoutResponse)
        let mtu = try await peripheral.mtu(of: GATTBenchShape.sinkID).map(String.init) ?? "unknown"
        printAndFlush(
            "# gatt: connected to \(discovery.address) from \(name); ATT MTU \(mtu), so the largest write "
                + "without response is \(largest) bytes")
        // The server's BlueZ 5.66 drops a Write Command of 511 or 512 bytes: its
        // shared/gatt-server.c write_cb counts the 2-byte handle into the value's length
        // (check_length(length, 0)). 5.82 takes 512.
        var large = largest
        let version = ProcessInfo.processInfo.environment["ABLE_BLUEZ_VERSION"].map {
            $0.split(separator: ".").compactMap { Int($0) }
        }
        if let version, version.count >= 2, version[0] == 5, version[1] <= 66, largest > 510 {
            large = 510
            printAndFlush(
                "# gatt: BlueZ \(version[0]).\(version[1]) as the server drops Write Commands of 511 or 512 bytes "
                    + "(shared/gatt-server.c check_length counts the handle): the large writes are 510 bytes")
        }
        for (size, n) in [(20, count), (large, largeCount)] where n > 0 {
            try await measureWrites(
                peripheral, sink: sink, size: size, count: n, rounds: rounds, reference: reference, adapter: name)
        }
        if notifications > 0 {
            try await measureNotifications(
                peripheral, count: notifications, rounds: rounds, reference: reference, adapter: name)
        }
    }
    return nil
}

private func reset(_ peripheral: Peripheral, size: Int) async throws {
    try await peripheral.write([0, UInt8(size & 0xFF), UInt8(size >> 8)], to: GATTBenchShape.controlID)
}

private func stats(_ peripheral: Peripheral) async throws -> ServerStats {
    try ServerStats(try await peripheral.read(GATTBenchShape.controlID))
}

/// Waits until the server has sent every notification it was asked for, so that a run starts
/// on a quiet link.
private func waitUntilNotificationsEnd(_ peripheral: Peripheral) async throws {
    while try await stats(peripheral).notifying { try await Task.sleep(for: .milliseconds(250)) }
}

/// Reads the server's stats until `count` distinct values arrived, or none arrived for 20 s.
private func waitForArrivals(_ peripheral: Peripheral, count: Int) async throws -> ServerStats {
    var last = try await stats(peripheral)
    var idleSince = monotonicSeconds()
    while last.distinct < count {
        try await Task.sleep(for: .milliseconds(250))
        let now = try await stats(peripheral)
        if now.received != last.received { idleSince = monotonicSeconds() }
        last = now
        if monotonicSeconds() - idleSince > 20 { break }
    }
    return last
}

private func pathResult(count: Int, start: Mark, sent: Mark, arrived: ServerStats) -> PathResult {
    PathResult(
        rate: Double(arrived.distinct) / (arrived.last - start.wall),
        cpu: (sent.user + sent.system - start.user - start.system) * 1e6 / Double(count),
        received: arrived.received, distinct: arrived.distinct, outOfOrder: arrived.outOfOrder,
        altered: arrived.altered)
}

private func measureWrites(
    _ peripheral: Peripheral, sink: RemoteCharacteristic, size: Int, count: Int, rounds: Int, reference: String,
    adapter: String
) async throws {
    let figure = "gatt-write-command-\(size)"
    let packets = (0..<count).map { GATTBenchShape.value(index: $0, size: size) }
    printAndFlush(
        "# \(figure): \(count) writes without response of \(size) bytes to Able's server, each numbered; the rate "
            + "is what the server received over the time from the first write to the last arrival (the guest's clock); "
            + "the cpu is the writing process's until its last write returned. \(rounds) rounds, each taking the three "
            + "paths in turn, each round starting with the path after the one the last round started with (the link's "
            + "pace drifts, and no path should always come first); the figures are the medians of the rounds")
    var runs: [WritePath: [PathResult]] = [:]
    for round in 1...rounds {
        let paths = WritePath.allCases
        for offset in paths.indices {
            let path = paths[(round - 1 + offset) % paths.count]
            let result = try await measureWritePath(
                path, peripheral, sink: sink, size: size, packets: packets, reference: reference, adapter: adapter)
            printAndFlush("# \(figure) \(path.label), round \(round): \(result.describe(count, unit: "write"))")
            runs[path, default: []].append(result)
        }
    }
    let all = runs.values.joined()
    let complete = all.allSatisfy { $0.distinct == count && $0.received == count && $0.altered == 0 }
    func outOfOrder(_ path: WritePath) -> Int { runs[path]!.map(\.outOfOrder).reduce(0, +) }
    printAndFlush(
        "# \(figure): "
            + (complete
                ? "every path delivered all \(count) values unaltered, none twice, in every round"
                : "VALUES LOST, ALTERED OR DUPLICATED (see above)")
            + "; out of order over all rounds: socket \(outOfOrder(.socket)), D-Bus \(outOfOrder(.bus)), "
            + "C \(outOfOrder(.reference))")
    let socket = PathResult(medianOf: runs[.socket]!)
    let bus = PathResult(medianOf: runs[.bus]!)
    let c = PathResult(medianOf: runs[.reference]!)
    func roundByRound(_ ratios: [Double]) -> String {
        ratios.map { fixed($0, 2) }.joined(separator: " ") + "; median \(fixed(median(ratios), 2))"
    }
    printAndFlush(
        "# \(figure) socket against D-Bus: rate ratio \(fixed(socket.rate / bus.rate, 2)) (goal 3), "
            + "cpu ratio \(fixed(bus.cpu / socket.cpu, 2)) (medians); rate ratio round by round: "
            + roundByRound(zip(runs[.socket]!, runs[.bus]!).map { $0.rate / $1.rate }))
    printAndFlush(
        "# \(figure): rate ratio against C round by round: "
            + roundByRound(zip(runs[.socket]!, runs[.reference]!).map { $0.rate / $1.rate }))
    printFigure(figure, able: socket, reference: c)
}

/// The three ways `gatt-write-command` writes.
private enum WritePath: CaseIterable {
    /// Able's `AcquireWrite` socket, through `Peripheral.writeWithoutResponse`.
    case socket
    /// Able's D-Bus `WriteValue` (type command): what Able does where BlueZ refuses the socket.
    case bus
    /// The C reference: `AcquireWrite` through libdbus, blocking `write(2)`.
    case reference

    var label: String {
        switch self {
        case .socket: "able (AcquireWrite socket)"
        case .bus: "able (D-Bus WriteValue)"
        case .reference: "reference (C, AcquireWrite through libdbus)"
        }
    }
}

/// Writes `packets` through `path`, after resetting the server's count, and returns what the
/// server received. Able's socket is released before the other paths: BlueZ lends it to one
/// client at a time, and Able's D-Bus path must not find it.
private func measureWritePath(
    _ path: WritePath, _ peripheral: Peripheral, sink: RemoteCharacteristic, size: Int, packets: [[UInt8]],
    reference: String, adapter: String
) async throws -> PathResult {
    let count = packets.count
    /// Resets the server's count, writes, and returns what the server received.
    func timed(_ write: () async throws -> Void) async throws -> PathResult {
        try await reset(peripheral, size: size)
        let start = Mark.now()
        try await write()
        let sent = Mark.now()
        return pathResult(
            count: count, start: start, sent: sent, arrived: try await waitForArrivals(peripheral, count: count))
    }
    switch path {
    case .socket:
        // Acquired before the run, by a value the server ignores.
        try await peripheral.write(
            GATTBenchShape.value(index: GATTBenchShape.warmUpIndex, size: size), to: GATTBenchShape.sinkID,
            type: .withoutResponse)
        return try await timed { try await peripheral.writeWithoutResponse(packets, to: GATTBenchShape.sinkID) }
    case .bus:
        await peripheral.backend.releaseWriteSocket(for: sink)
        return try await timed {
            for packet in packets {
                try await peripheral.backend.write(packet, to: sink, type: .withoutResponse, offset: 0)
            }
        }
    case .reference:
        await peripheral.backend.releaseWriteSocket(for: sink)
        try await reset(peripheral, size: size)
        let output = try ReferenceOutput(
            try await runReference(
                reference, ["write", adapter, GATTBenchShape.sink.uuidString, "\(count)", "\(size)"]),
            count: count)
        let arrived = try await waitForArrivals(peripheral, count: count)
        return PathResult(
            rate: Double(arrived.distinct) / (arrived.last - output.start), cpu: output.cpu,
            received: arrived.received, distinct: arrived.distinct, outOfOrder: arrived.outOfOrder,
            altered: arrived.altered)
    }
}

private func measureNotifications(
    _ peripheral: Peripheral, count: Int, rounds: Int, reference: String, adapter: String
) async throws {
    let figure = "gatt-notify-socket"
    let size = 20
    printAndFlush(
        "# \(figure): \(count) notifications of \(size) bytes from Able's server, each numbered, taken in a "
            + "for-try-await loop and through NotificationStream.forEach (each path's figure is the better of the "
            + "two); the central asks the server for them with a write to its control characteristic (the "
            + "server waits \(GATTBenchShape.notificationDelay) before the first). The figure spans the "
            + "notifications after the first, from the moment the first was taken to the last, on both sides "
            + "alike; the cpu is the central process's; the CPU from the request to the first is printed apart. "
            + "\(rounds) rounds, each taking every Able path and then the C reference in turn; the figures are "
            + "the medians of the rounds")
    var able: [NotificationDelivery: [GATTNotificationConsumer: [PathResult]]] = [:]
    var c: [PathResult] = []
    for round in 1...rounds {
        for delivery in [NotificationDelivery.socket, .propertiesChanged] {
            for consumer in [GATTNotificationConsumer.loop, .handler] {
                let result = try await receiveNotifications(
                    peripheral, delivery: delivery, consumer: consumer, count: count, size: size)
                let label = delivery == .socket ? "AcquireNotify socket" : "D-Bus PropertiesChanged"
                printAndFlush(
                    "# \(figure) able (\(label), \(consumer.label)), round \(round): "
                        + result.describe(count, unit: "notification"))
                able[delivery, default: [:]][consumer, default: []].append(result)
            }
        }
        try await waitUntilNotificationsEnd(peripheral)
        let output = try ReferenceOutput(
            try await runReference(
                reference,
                [
                    "notify", adapter, GATTBenchShape.stream.uuidString, GATTBenchShape.control.uuidString,
                    "\(count)", "\(size)",
                ]),
            count: count)
        let result = PathResult(
            rate: Double(output.operations) / output.wall, cpu: output.cpu, received: count,
            distinct: count - output.lost, outOfOrder: output.reordered, setup: output.setup)
        printAndFlush(
            "# \(figure) reference (C, AcquireNotify through libdbus), round \(round): "
                + result.describe(count, unit: "notification"))
        c.append(result)
    }
    // Each path's figure is the better of the two public ways to take values: all arrived in every
    // round, then the lower median CPU.
    func best(_ delivery: NotificationDelivery) -> (GATTNotificationConsumer, [PathResult]) {
        let runs = able[delivery]!
        let (loop, handler) = (runs[.loop]!, runs[.handler]!)
        let loopComplete = loop.allSatisfy { $0.isComplete(count) }
        let handlerComplete = handler.allSatisfy { $0.isComplete(count) }
        if loopComplete != handlerComplete { return handlerComplete ? (.handler, handler) : (.loop, loop) }
        return median(handler.map(\.cpu)) <= median(loop.map(\.cpu)) ? (.handler, handler) : (.loop, loop)
    }
    let (socketConsumer, socketRuns) = best(.socket)
    let (_, busRuns) = best(.propertiesChanged)
    let socket = PathResult(medianOf: socketRuns)
    let bus = PathResult(medianOf: busRuns)
    let reference = PathResult(medianOf: c)
    printAndFlush(
        "# \(figure) socket against D-Bus: cpu ratio \(fixed(bus.cpu / socket.cpu, 2)) (goal 3), "
            + "rate ratio \(fixed(socket.rate / bus.rate, 2)) (medians)")
    // The guest's pace and the host's load drift from round to round; the ratio of each round's C
    // run to the Able run of the same round shows how much of the spread both sides shared.
    let paired = zip(c, socketRuns).map { $0.cpu / $1.cpu }
    printAndFlush(
        "# \(figure): figure below is Able through the \(socketConsumer.label) (median of \(rounds) rounds); "
            + "cpu ratio round by round: \(paired.map { fixed($0, 2) }.joined(separator: " ")); "
            + "median \(fixed(median(paired), 2))")
    printFigure(figure, able: socket, reference: reference)
}

/// Takes `count` notifications through `delivery` and `consumer`, after the server has finished
/// any it was sending.
private func receiveNotifications(
    _ peripheral: Peripheral, delivery: NotificationDelivery, consumer: GATTNotificationConsumer, count: Int,
    size: Int
) async throws -> PathResult {
    try await waitUntilNotificationsEnd(peripheral)
    let stream = try await peripheral.notifications(of: GATTBenchShape.streamID, delivery: delivery)
    let start = Mark.now()
    let receiving = Task.detached { () async throws -> NotificationTally in
        try await consumer.receive(stream, count: count, size: size)
    }
    try await peripheral.write(
        [1] + (0..<4).map { UInt8(truncatingIfNeeded: count >> (8 * $0)) } + [UInt8(size), 0],
        to: GATTBenchShape.controlID)
    let watchdog = Task {
        try await Task.sleep(for: .seconds(Double(count) / 2 + 60))
        receiving.cancel()
    }
    let tally = try await receiving.value
    watchdog.cancel()
    return tally.result(start: start, end: Mark.now())
}

/// The middle value of `values` (the mean of the two middle ones for an even count).
private func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

private func printFigure(_ figure: String, able: PathResult, reference: PathResult) {
    printAndFlush(
        "\(figure) rate: able \(fixed(able.rate, 1))/s, reference \(fixed(reference.rate, 1))/s, "
            + "ratio \(fixed(able.rate / reference.rate, 2))")
    printAndFlush(
        "\(figure) cpu: able \(fixed(able.cpu, 2)) us/op, reference \(fixed(reference.cpu, 2)) us/op, "
            + "ratio \(fixed(reference.cpu / able.cpu, 2))")
}

private func fixed(_ value: Double, _ digits: Int) -> String {
    String(format: "%.\(digits)f", value)
}

/// How `gatt-notify-socket` takes the values: the public API's two ways.
private enum GATTNotificationConsumer {
    /// A `for try await` loop in a task on the global executor.
    case loop
    /// `NotificationStream.forEach(_:)`: the handler on Able's event loop.
    case handler

    var label: String { self == .loop ? "for-try-await loop" : "forEach handler" }

    /// Takes values until `count` arrived, checking each one's length and noting its index.
    func receive(_ stream: NotificationStream, count: Int, size: Int) async throws -> NotificationTally {
        switch self {
        case .loop:
            var tally = NotificationTally(count: count)
            for try await value in stream {
                try tally.note(value, size: size)
                if tally.received == count { break }
            }
            return tally
        case .handler:
            let tally = SharedTally(count: count)
            let reached = AsyncStream<Void>.makeStream()
            let consumer = Task {
                try await stream.forEach { value in
                    if tally.note(value, size: size, count: count) { reached.continuation.finish() }
                }
            }
            // Also ends when this task is cancelled (the watchdog's doing).
            for await _ in reached.stream {}
            consumer.cancel()
            try await consumer.value
            let (result, failure) = tally.result
            if let failure { throw failure }
            return result
        }
    }
}

/// A ``NotificationTally`` that the handler notes values in on Able's event loop and the task
/// reads at the end, behind a `Mutex` as ``SharedSequenceCheck`` is, and for its reason: the
/// uncontended `Mutex` takes one atomic instruction each way, inline, where Able's `Lock` calls
/// the C library twice, so the harness's share of Able's figure stays small (the C reference
/// counts with no lock at all).
private final class SharedTally: Sendable {
    private let state: Mutex<(tally: NotificationTally, failure: BenchmarkFailure?)>

    init(count: Int) { state = Mutex((NotificationTally(count: count), nil)) }

    /// Notes a value; returns whether the run is done: `count` values, or one that failed.
    func note(_ value: [UInt8], size: Int, count: Int) -> Bool {
        state.withLock { state in
            do throws(BenchmarkFailure) {
                try state.tally.note(value, size: size)
            } catch {
                state.failure = error
                return true
            }
            return state.tally.received == count
        }
    }

    /// What was noted, and the failure if a value failed.
    var result: (NotificationTally, BenchmarkFailure?) { state.withLock { ($0.tally, $0.failure) } }
}

/// What a notification run received: the order, and when the first value was taken and the
/// `count`th, as the host benchmarks check them (``SequenceCheck``), and which indexes came.
private struct NotificationTally: Sendable {
    var sequence = SequenceCheck()
    /// Whether each index of the run came; no clock, no hashing per value.
    private var seen: [Bool]
    private var distinct = 0

    init(count: Int) { seen = Array(repeating: false, count: count) }

    var received: Int { sequence.received }

    /// Notes a value; throws if it is not `size` bytes with an index.
    mutating func note(_ value: [UInt8], size: Int) throws(BenchmarkFailure) {
        guard let index = GATTBenchShape.index(of: value), value.count == size else {
            throw BenchmarkFailure("a notification of \(value.count) bytes, not \(size)")
        }
        if index < seen.count, !seen[index] {
            seen[index] = true
            distinct += 1
        }
        sequence.note(UInt64(index))
        if sequence.received == seen.count { sequence.end = Mark.now() }
    }

    /// The run's figure, as the C reference counts it: the values after the first, from the moment
    /// the first was taken to the last (else `end`); the CPU from `start` (the request) to the first
    /// apart.
    func result(start: Mark, end: Mark) -> PathResult {
        let (first, end) = sequence.span(endingBy: end)
        let values = max(received - 1, 1)
        return PathResult(
            rate: Double(values) / (end.wall - first.wall),
            cpu: (end.user + end.system - first.user - first.system) * 1e6 / Double(values),
            received: received, distinct: distinct, outOfOrder: sequence.reordered,
            setup: (first.user + first.system - start.user - start.system) * 1e6)
    }
}
