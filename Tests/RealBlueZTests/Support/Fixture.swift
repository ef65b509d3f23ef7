import Foundation

/// The scripts in `Tests/RealBlueZTests/Fixtures`, run with the host's `/usr/bin/python3` (which
/// the guest shares, with python3-dbus and python3-gi).
enum Fixture {
    /// The fixture's path; the guest sees the repository where the host built it.
    static func path(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures").appendingPathComponent(name).path
    }

    /// Starts a fixture with `arguments`, its output going to a file (see ``ChildProcess``).
    static func start(_ name: String, _ arguments: [String]) throws -> ChildProcess {
        try ChildProcess.start("/usr/bin/python3", ["-u", path(name)] + arguments)
    }
}

extension ChildProcess {
    /// Waits until the program's output has a line for which `matches` holds, and returns it.
    ///
    /// - Throws: ``TimedOut`` when no such line comes within `timeout`, with the output so far.
    func line(
        _ what: String, timeout: Duration = .seconds(20), where matches: @escaping (Substring) -> Bool
    ) async throws -> Substring {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            if let line = output.split(separator: "\n").first(where: matches) { return line }
            guard clock.now < deadline else {
                throw TimedOut(waitingFor: "\(what); the output so far:\n\(output)", timeout: timeout)
            }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    /// Kills the program and waits for it, so that nothing it registered outlives the test.
    func stop() async {
        kill()
        _ = await exitStatus()
    }
}
