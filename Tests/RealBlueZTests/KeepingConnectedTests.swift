import Foundation
import Testing

extension RealBlueZ {
    /// `Snippets/KeepingConnected.swift` on real BlueZ, as its own binary: its sensor (an Able GATT
    /// server) on hci1 drops the link, its central on hci0 reconnects through a maintained
    /// connection, sets the link up again and takes the next readings, gives up once the sensor is
    /// gone, and finds it again with a new scan.
    @Suite(.timeLimit(.minutes(3)))
    struct KeepingConnected {
        @Test func theSnippetBinary() async throws {
            let snippet = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("KeepingConnected").path
            try #require(
                FileManager.default.isExecutableFile(atPath: snippet),
                "\(snippet) is missing: `swift build` builds it (`--product AblePackageTests` does not)")
            try await withRig { _ in
                let child = try ChildProcess.start(snippet, [Guest.peripheral, Guest.central])
                let status = try await withCleanup {
                    try await withDeadline(.seconds(120), waitingFor: "the snippet to exit") {
                        await child.exitStatus()
                    }
                } cleanup: {
                    child.kill()
                }
                let output = child.output
                #expect(status == 0, "KeepingConnected exited with \(status):\n\(output)")
                let lines = output.split(separator: "\n").map(String.init)
                // Before BlueZ 5.83 the gap's reason is `disconnected`: BlueZ does not say why.
                let events = lines.filter { $0.hasPrefix("reading ") || $0.hasPrefix("connected;") }
                #expect(
                    Array(events.prefix(8)) == [
                        "connected; firmware 1.0.3", "reading [1]", "reading [2]", "reading [3]",
                        "connected; firmware 1.0.3", "reading [4]", "reading [5]", "reading [6]",
                    ], "\(output)")
                #expect(lines.contains { $0.hasPrefix("gap: ") }, "\(output)")
                #expect(lines.contains { $0.hasPrefix("gave up: ") }, "\(output)")
                #expect(lines.last == "found again: true", "\(output)")
            }
        }
    }
}
