import AbleIO
import Foundation
import Testing

/// The fixture `gatt-central.py`: a GATT central written with python3-dbus, which the test
/// drives one request at a time over its standard input and output (see the script for the
/// requests).
final class ForeignCentral: Sendable {
    /// One request; the fields a request does not use stay `nil` and are left out.
    struct Request: Encodable, Sendable {
        var op: String
        var uuid: String?
        var address: String?
        var characteristic: String?
        var value: String?
        var type: String?
        var offset: Int?
        var count: Int?
        var timeout: Double?
        var name: String?
        var root: String?
        var paths: [String]?
    }

    /// One reply: `ok`, and the fields of the request's answer or the error.
    struct Reply: Decodable, Sendable, CustomStringConvertible {
        struct Call: Decodable, Sendable {
            var path: String
            var method: String
            var error: String?
            var message: String?
        }

        var ok: Bool
        var error: String?
        var message: String?
        var address: String?
        var uuids: [String]?
        var value: String?
        var values: [String]?
        var calls: [Call]?

        var description: String {
            ok ? "ok" : "\(error ?? "?"): \(message ?? "")"
        }
    }

    /// A request the central answered with an error.
    struct Failed: Error, CustomStringConvertible {
        var request: String
        var reply: Reply
        var description: String { "\(request) failed: \(reply)" }
    }

    let pid: pid_t
    private let input: Int32
    private let output: Int32
    /// Where the script's standard error goes.
    let errorPath: String
    /// Bytes read after the last complete line.
    private let pending = Lock<[UInt8]>([])

    private init(pid: pid_t, input: Int32, output: Int32, errorPath: String) {
        self.pid = pid
        self.input = input
        self.output = output
        self.errorPath = errorPath
    }

    deinit {
        close(input)
        close(output)
    }

    /// Starts the central on `adapter`.
    static func start(on adapter: String) throws -> ForeignCentral {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard pipe(&fromChild) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        // The child gets its ends as 0 and 1 only, and neither end leaks into other children.
        for descriptor in toChild + fromChild { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        defer {
            close(toChild[0])
            close(fromChild[1])
        }
        let errorPath = "/tmp/able-central-\(UUID().uuidString).log"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let arguments: [String] = ["/usr/bin/python3", "-u", Fixture.path("gatt-central.py"), adapter]
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let error = posix_spawn(&pid, "/usr/bin/python3", &actions, nil, argv, environ)
        guard error == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EINVAL)
        }
        return ForeignCentral(pid: pid, input: toChild[1], output: fromChild[0], errorPath: errorPath)
    }

    /// Sends a request and waits for its reply.
    ///
    /// - Parameter timeout: How long to wait for the reply; the script bounds its own waits by
    ///   the request's `timeout`, so this only catches a script that hangs or died.
    /// - Throws: ``Failed`` when the central answered with an error, ``TimedOut`` when it did not
    ///   answer in time.
    @discardableResult
    func send(_ request: Request, timeout: Duration = .seconds(45)) async throws -> Reply {
        let reply = try await attempt(request, timeout: timeout)
        guard reply.ok else { throw Failed(request: request.op, reply: reply) }
        return reply
    }

    /// Sends a request that should fail, and returns the reply.
    func attempt(_ request: Request, timeout: Duration = .seconds(45)) async throws -> Reply {
        var line = try JSONEncoder().encode(request)
        line.append(UInt8(ascii: "\n"))
        let written = line.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
        guard written == line.count else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPIPE, userInfo: [:])
        }
        let answer = try await readLine(timeout: timeout, waitingFor: "the central's reply to \(request.op)")
        do {
            return try JSONDecoder().decode(Reply.self, from: Data(answer))
        } catch {
            Issue.record("the central answered \(String(decoding: answer, as: UTF8.self)) to \(request.op)")
            throw error
        }
    }

    /// Reads up to the next newline, polling so that a silent script cannot block a thread for good.
    private func readLine(timeout: Duration, waitingFor what: String) async throws -> [UInt8] {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { [self] in
                let deadline = ContinuousClock.now + timeout
                var buffer = pending.withLock { $0 }
                var chunk = [UInt8](repeating: 0, count: 4096)
                while true {
                    if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                        pending.withLock { $0 = Array(buffer[(newline + 1)...]) }
                        continuation.resume(returning: Array(buffer[..<newline]))
                        return
                    }
                    guard ContinuousClock.now < deadline else {
                        let errors = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
                        continuation.resume(
                            throwing: TimedOut(waitingFor: "\(what); stderr: \(errors)", timeout: timeout))
                        return
                    }
                    var descriptor = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
                    guard poll(&descriptor, 1, 200) > 0 else { continue }
                    let count = read(output, &chunk, chunk.count)
                    if count <= 0 {
                        let errors = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
                        continuation.resume(
                            throwing: StreamEnded(waitingFor: "\(what): the central exited; stderr: \(errors)"))
                        return
                    }
                    buffer += chunk[..<count]
                }
            }
        }
    }

    /// Kills the central and waits for it; BlueZ then drops what it had started (discovery,
    /// notifications), though not its connection.
    func stop() async {
        _ = Glibc.kill(pid, SIGKILL)
        await withCheckedContinuation { [pid] (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                continuation.resume()
            }
        }
    }
}

extension ForeignCentral.Request {
    /// A request with no fields but its operation.
    static func op(_ op: String) -> Self { Self(op: op) }
}

extension [UInt8] {
    /// The bytes as the fixtures write them: lower-case hex, no separators.
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
