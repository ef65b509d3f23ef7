import Foundation
import Testing

/// A program this test started, its standard output and error going to a file in `/tmp`.
///
/// Started with `posix_spawn` rather than Foundation's `Process` (see ``Guest/run(_:_:)``).
struct ChildProcess: Sendable {
    let pid: pid_t
    let outputPath: String

    /// Starts `path` with `arguments`, standard input from `/dev/null`.
    static func start(_ path: String, _ arguments: [String]) throws -> ChildProcess {
        let outputPath = "/tmp/able-child-\(UUID().uuidString).log"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let error = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard error == 0 else { throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EINVAL) }
        return ChildProcess(pid: pid, outputPath: outputPath)
    }

    /// Waits for the program to exit.
    ///
    /// - Returns: Its exit status, or 128 + the signal's number when a signal ended it.
    func exitStatus() async -> Int32 {
        await withCheckedContinuation { [pid] continuation in
            DispatchQueue.global().async {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                let signal = status & 0x7f
                continuation.resume(returning: signal == 0 ? (status >> 8) & 0xff : 128 + signal)
            }
        }
    }

    /// Everything the program wrote so far.
    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Kills the program if it still runs (its waiter, if any, then returns).
    func kill() {
        _ = Glibc.kill(pid, SIGKILL)
    }
}
