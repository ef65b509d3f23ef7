import AbleBlueZ
import Foundation
import Testing

/// The QEMU guest that `Scripts/bluez-vm/run-tests` boots, as its environment describes it.
enum Guest {
    private static var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// Whether this process runs in the guest, next to a real `bluetoothd`.
    static var isRunning: Bool { environment["ABLE_BLUEZ_GUEST"] == "1" }

    /// The adapter that scans and connects (`hci0`).
    static var central: String { environment["ABLE_BLUEZ_CENTRAL"] ?? "hci0" }

    /// The adapter that advertises and serves (`hci1`).
    static var peripheral: String { environment["ABLE_BLUEZ_PERIPHERAL"] ?? "hci1" }

    /// A second adapter that scans and connects (`hci2`), so that one server can face two centrals.
    static var secondCentral: String { environment["ABLE_BLUEZ_SECOND_CENTRAL"] ?? "hci2" }

    /// The version of the guest's `bluetoothd` (`ABLE_BLUEZ_VERSION`: `5.66` or `5.82`), or `nil`
    /// outside the guest; ordered, as in `Guest.bluezVersion! >= BlueZVersion(5, 70)`.
    static var bluezVersion: BlueZVersion? { environment["ABLE_BLUEZ_VERSION"].flatMap(BlueZVersion.init) }

    /// Runs the guest's `restart-bluetoothd` script and waits for it to exit.
    ///
    /// The script returns once the new `bluetoothd` has both adapters powered on D-Bus; its
    /// errors go to this process's standard error. With `options` (e.g. `"-E"`), that start
    /// adds them to the run's options; the next restart without them drops them again.
    /// - Returns: The script's exit status.
    static func restartBluetoothd(_ action: String = "restart", with options: String? = nil) async throws -> Int32 {
        let script = try #require(environment["ABLE_BLUEZ_RESTART"], "ABLE_BLUEZ_RESTART is not set")
        return try await run(script, [action] + (options.map { ["--with", $0] } ?? []))
    }

    /// Runs a program and waits for it to exit; its standard streams are this process's.
    ///
    /// Not Foundation's `Process`: it learns of the child's exit through a CFSocket, whose wakeup
    /// socket pair needs a connected UDP loopback, and the guest's `lo` is down
    /// (`connect` fails with `ENETUNREACH`), so its `terminationHandler` may never run.
    /// - Returns: The exit status, or 128 + the signal's number when a signal ended it.
    static func run(_ path: String, _ arguments: [String]) async throws -> Int32 {
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let error = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard error == 0 else { throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EINVAL) }
        return await withCheckedContinuation { [pid] continuation in
            DispatchQueue.global().async {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                let signal = status & 0x7f
                continuation.resume(returning: signal == 0 ? (status >> 8) & 0xff : 128 + signal)
            }
        }
    }
}

extension Trait where Self == ConditionTrait {
    /// Runs a test only on a guest `bluetoothd` of at least `major.minor`; elsewhere it is reported
    /// as skipped, with the reason (which should say what the older BlueZ lacks).
    static func needsBlueZ(_ major: Int, _ minor: Int, _ reason: Comment) -> Self {
        .enabled(if: (Guest.bluezVersion ?? .init(0, 0)) >= .init(major, minor), reason)
    }

    /// Runs a suite only in the guest; elsewhere its tests are reported as skipped, with the reason.
    static var onlyInTheBlueZGuest: Self {
        .enabled(
            if: Guest.isRunning,
            "needs real BlueZ in the QEMU guest: run Scripts/bluez-vm/run-tests")
    }
}
