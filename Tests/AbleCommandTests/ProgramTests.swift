import AbleTestSupport
import Foundation
import Testing

/// The built programs, run as a user runs them: the `able` binary, the soak's `able-soak`, and
/// every snippet in `Snippets/` on the simulated radio (or a private bus), so that none can rot.
@Suite("The built programs", .timeLimit(.minutes(1)))
struct ProgramTests {
    /// Runs the built program `name` with `arguments` and returns its status, standard output
    /// and standard error.
    func run(_ name: String, _ arguments: [String]) async throws -> (status: Int32, out: String, error: String) {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let binary = directory.appendingPathComponent(name)
        try #require(
            FileManager.default.isExecutableFile(atPath: binary.path),
            "\(binary.path) is missing: `swift build` builds it (`--product AblePackageTests` does not)")
        // Waiting for the program blocks: do it on a thread of its own. On one of the few threads
        // the tests' tasks share, it stalls every other test while the program runs (for seconds
        // under a sanitizer, long enough for their time limits to pass).
        return try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try Self.runBlocking(binary, arguments) })
            }.start()
        }
    }

    private static func runBlocking(_ binary: URL, _ arguments: [String]) throws -> (
        status: Int32, out: String, error: String
    ) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let out = Pipe()
        let error = Pipe()
        process.standardOutput = out
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read before waiting: a full pipe would block the program.
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (
            process.terminationStatus, String(decoding: outData, as: UTF8.self),
            String(decoding: errorData, as: UTF8.self)
        )
    }

    @Test("able with a bad command line exits 64 with the reason and the usage, no stack trace")
    func badCommandLine() async throws {
        let result = try await run("able", ["read", "not-an-address", "2a19"])
        #expect(result.status == 64)
        #expect(result.out.isEmpty)
        #expect(result.error.hasPrefix("able read: 'not-an-address' is not a Bluetooth address"))
        #expect(result.error.contains("Usage: able read [options] ADDRESS CHARACTERISTIC"))
        #expect(!result.error.contains("Fatal error"))
    }

    @Test("able-soak, the soak's own program, is built beside able and refuses a bad command line with 64")
    func soakProgram() async throws {
        let result = try await run("able-soak", ["--role", "peripheral"])
        #expect(result.status == 64)
        #expect(result.out.isEmpty)
        #expect(result.error.hasPrefix("able-soak: --role must be central or server, not 'peripheral'"))
        #expect(result.error.contains("Usage: able-soak [options]"))
    }

    @Test("able demo runs the seed scenario on the simulated radio")
    func demo() async throws {
        let result = try await run("able", ["demo"])
        #expect(result.status == 0, "\(result.out)\n\(result.error)")
        let lines = result.out.split(separator: "\n")
        #expect(lines.contains { $0.hasSuffix("central: took 3; unsubscribed") }, "\(result.out)")
        #expect(lines.filter { $0.hasSuffix("bytes, got them echoed") }.count == 3, "\(result.out)")
        #expect(lines.last?.hasSuffix("demo: done") == true, "\(result.out)")
    }

    @Test("Snippets/Scan.swift finds the simulated battery device and not the lamp")
    func scanSnippet() async throws {
        let result = try await run("Scan", ["--simulated"])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.out.hasPrefix("found 00:5A:00:00:00:01 Sensor at -50 dBm\n"), "\(result.out)")
    }

    @Test("Snippets/Notifications.swift takes exactly five measurements")
    func notificationsSnippet() async throws {
        let result = try await run("Notifications", ["--simulated"])
        #expect(result.status == 0, "\(result.error)")
        let rates = result.out.split(separator: "\n").filter { $0.hasPrefix("heart rate: ") }
        #expect(rates == (60..<65).map { "heart rate: \($0) bpm" }, "\(result.out)")
        #expect(result.out.hasSuffix("took 5 measurements; unsubscribed and disconnected\n"))
    }

    @Test("Snippets/ReadAcrossServices.swift reads across services and takes B1's count of notifications")
    func readAcrossServicesSnippet() async throws {
        let result = try await run("ReadAcrossServices", ["--simulated"])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.out.split(separator: "\n").map(String.init)
        #expect(lines.contains("A1 = [161], B1 = [3]"), "\(result.out)")
        #expect(
            lines.filter { $0.hasPrefix("B2 notified") } == ["B2 notified [1]", "B2 notified [2]", "B2 notified [3]"])
    }

    @Test("Snippets/SeedServer.swift serves the PSM of a real listener and closes")
    func seedServerSnippet() async throws {
        let result = try await run("SeedServer", ["--simulated"])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.out.split(separator: "\n").map(String.init)
        let psm = try #require(lines.first?.split(separator: " ").dropFirst().prefix(2).joined(separator: " "))
        #expect(psm.hasPrefix("PSM 0x00"), "\(result.out)")
        #expect(lines.contains("the central read \(psm)"), "\(result.out)")
        #expect(lines.last == "closed")
    }

    @Test("Snippets/L2CAPEcho.swift publishes a PSM, opens the channel and gets each message back")
    func l2capEchoSnippet() async throws {
        let result = try await run("L2CAPEcho", ["--simulated"])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.out.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("server: listening on PSM 0x00") == true, "\(result.out)")
        #expect(
            lines.filter { $0.hasPrefix("central: echoed") && $0.hasSuffix("the same") }.count == 3, "\(result.out)")
        #expect(lines.last == "done")
    }

    @Test("Snippets/KeepingConnected.swift keeps its readings across a link drop, gives up, and scans again")
    func keepingConnectedSnippet() async throws {
        let result = try await run("KeepingConnected", ["--simulated"])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.out.split(separator: "\n").map(String.init)
        // Three readings on the first link, a gap, the set-up again, three more on the second link.
        let events = lines.filter { $0.hasPrefix("reading ") || $0.hasPrefix("gap: ") || $0.hasPrefix("connected;") }
        #expect(
            Array(events.prefix(9)) == [
                "connected; firmware 1.0.3", "reading [1]", "reading [2]", "reading [3]", "gap: peerDisconnected",
                "connected; firmware 1.0.3", "reading [4]", "reading [5]", "reading [6]",
            ], "\(result.out)")
        #expect(lines.filter { $0 == "receiving" }.count == 2, "\(result.out)")
        #expect(lines.contains { $0.hasPrefix("gave up: ") }, "\(result.out)")
        #expect(lines.last == "found again: true", "\(result.out)")
    }

    @Test("Snippets/DBusTour.swift runs on a private bus")
    func dbusTourSnippet() async throws {
        let bus = try PrivateBus()
        _ = try await bus.connect()  // the daemon listens now
        let result = try await run("DBusTour", [bus.address])
        #expect(result.status == 0, "\(result.error)")
        #expect(!result.out.isEmpty)
    }
}
