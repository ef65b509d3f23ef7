public import AbleDBus
import Foundation

/// A `dbus-daemon` of the test's own, on a socket in a fresh temporary directory.
///
/// It keeps dbus-daemon's default limits of method calls awaiting replies (128) and match rules
/// (512) per connection, as Debian's system bus does (`/usr/share/dbus-1/system.conf` sets
/// neither), so that tests meet what a gateway with many devices meets.
public final class PrivateBus: Sendable {
    public let address: String
    private let process: Process
    private let control: FileHandle
    private let daemonPID: pid_t
    private let directory: URL

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("able-bus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let socket = directory.appendingPathComponent("bus").path
        let config = directory.appendingPathComponent("bus.conf")
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:path=\(socket)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
          <limit name="max_incoming_bytes">1000000000</limit>
          <limit name="max_outgoing_bytes">1000000000</limit>
          <limit name="max_message_size">1000000000</limit>
        </busconfig>
        """.write(to: config, atomically: true, encoding: .utf8)
        // The daemon runs under a small shell that stops it when this process is gone (checked
        // every second), so a crashed or killed test run leaves no daemon behind.
        let control = Pipe()
        let output = Pipe()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [
            "-c",
            "\"$0\" --config-file=\"$1\" --nofork --nopidfile --nosyslog >/dev/null 2>&1 </dev/null & daemon=$!; "
                + "echo $daemon; while kill -0 \"$2\" 2>/dev/null && kill -0 $daemon 2>/dev/null; do sleep 1; done; "
                + "kill -9 $daemon 2>/dev/null",
            PrivateBus.daemonPath, config.path, String(getpid()),
        ]
        process.standardInput = control
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.control = control.fileHandleForWriting
        let pidLine = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        daemonPID = pid_t(pidLine.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        address = "unix:path=\(socket)"
        guard daemonPID > 0 else {
            try? self.control.close()
            throw DBusError(.failed, "dbus-daemon did not start")
        }
        // The daemon is ready once it listens on its socket: connect() waits for that without
        // blocking a thread that other tests' tasks need.
    }

    static let daemonPath: String = {
        for candidate in ["/usr/bin/dbus-daemon", "/bin/dbus-daemon", "/usr/local/bin/dbus-daemon"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "/usr/bin/dbus-daemon"
    }()

    /// Connects to the bus, on `executor` (by default the event loop all connections share).
    public func connect(executor: DBusExecutor = .shared) async throws -> DBusConnection {
        // The daemon creates its socket, then listens on it, a moment after it starts.
        let notYet = ["org.freedesktop.DBus.Error.FileNotFound", "org.freedesktop.DBus.Error.NoServer"]
        for _ in 0..<(250 * Sanitizers.slowdown) {
            do {
                return try await DBusConnection.connect(to: .address(address), executor: executor, log: { _ in })
            } catch let error as DBusError where notYet.contains(error.name.rawValue) {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        return try await DBusConnection.connect(to: .address(address), executor: executor, log: { _ in })
    }

    /// Kills the daemon at once, as a crash would.
    public func kill() {
        Foundation.kill(daemonPID, SIGKILL)
    }

    deinit {
        Foundation.kill(daemonPID, SIGKILL)
        try? control.close()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Runs `body` with a fresh private bus and a connection to it.
public func withPrivateBus<T>(_ body: (PrivateBus, DBusConnection) async throws -> T) async throws -> T {
    let bus = try PrivateBus()
    let connection = try await bus.connect()
    defer { _ = bus }
    let result = try await body(bus, connection)
    await connection.close()
    return result
}
