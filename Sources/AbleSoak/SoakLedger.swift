import Able
import AbleIO
import CLinux

/// What a soak counts: operations completed and errors per kind, values lost or duplicated on
/// the paths that survived, and the longest time without any completed operation.
final class SoakLedger: Sendable {
    private struct Counts {
        var operations: [String: Int] = [:]
        var errors: [String: Int] = [:]
        /// The first message of each kind of error.
        var examples: [String: String] = [:]
        /// Errors that are not ``BluetoothError`` (each one fails the soak), with their text.
        var untyped: [String] = []
        var lost: [String: Int] = [:]
        var duplicated: [String: Int] = [:]
        var lastProgress: ContinuousClock.Instant?
        var longestStall: Duration = .zero
        var longestStallEnded: ContinuousClock.Instant?
    }

    /// The operations whose completion counts as progress (scan results and gaps do not).
    static let progressKinds: Set<String> = ["read", "write", "notification", "l2cap echo"]

    let start = ContinuousClock.now
    private let counts = Lock(Counts())

    /// Counts one `kind` of operation completed.
    func completed(_ kind: String) {
        let now = ContinuousClock.now
        counts.withLock { counts in
            counts.operations[kind, default: 0] += 1
            guard Self.progressKinds.contains(kind) else { return }
            if let last = counts.lastProgress, now - last > counts.longestStall {
                counts.longestStall = now - last
                counts.longestStallEnded = now
            }
            counts.lastProgress = now
        }
    }

    /// Counts an error of the operation `kind`: by its code when it is a ``BluetoothError``,
    /// else as untyped, which fails the soak.
    func failed(_ kind: String, _ error: any Error) {
        counts.withLock { counts in
            if let error = error as? BluetoothError {
                let key = "\(kind): \(error.code)"
                counts.errors[key, default: 0] += 1
                if counts.examples[key] == nil { counts.examples[key] = error.message }
            } else {
                counts.errors["\(kind): untyped", default: 0] += 1
                counts.untyped.append("\(kind): \(type(of: error)): \(error)")
            }
        }
    }

    /// Counts `count` values of `kind` that did not arrive on a path that survived.
    func lost(_ kind: String, _ count: Int = 1) {
        counts.withLock { $0.lost[kind, default: 0] += count }
    }

    /// Counts `count` values of `kind` that arrived more than once, or out of order.
    func duplicated(_ kind: String, _ count: Int = 1) {
        counts.withLock { $0.duplicated[kind, default: 0] += count }
    }

    /// Ends the stall measurement at `end` (a stall still going on then counts too).
    func finish(at end: ContinuousClock.Instant) {
        counts.withLock { counts in
            let last = counts.lastProgress ?? start
            if end - last > counts.longestStall {
                counts.longestStall = end - last
                counts.longestStallEnded = end
            }
        }
    }

    var operations: [String: Int] { counts.withLock { $0.operations } }
    var errors: [String: Int] { counts.withLock { $0.errors } }
    /// The first message of each kind of error, by the keys of ``errors``.
    var errorExamples: [String: String] { counts.withLock { $0.examples } }
    var untyped: [String] { counts.withLock { $0.untyped } }
    var lostValues: [String: Int] { counts.withLock { $0.lost } }
    var duplicatedValues: [String: Int] { counts.withLock { $0.duplicated } }
    /// The longest stall and how long after the start it ended.
    var longestStall: (duration: Duration, endedAfter: Duration) {
        counts.withLock { ($0.longestStall, ($0.longestStallEnded ?? start) - start) }
    }
}

/// The process's memory and open file descriptors.
struct ProcessSample: Sendable, CustomStringConvertible {
    /// Resident memory (`VmRSS`), what the soak judges: it also counts the program's code as
    /// recovery paths first page it in. It does not count the free memory of malloc's arenas,
    /// which ``now()`` first hands back to the kernel.
    var residentKiB: Int
    /// The bytes the program has allocated and not freed (glibc's `mallinfo2`: chunks in use in
    /// every arena, and those mapped on their own).
    var heapInUseKiB: Int
    var openFileDescriptors: Int
    /// What each open descriptor refers to (`socket:[…]`, `anon_inode:[eventfd]`, a path).
    var fileDescriptorTargets: [String]
    /// The anonymous part of ``residentKiB`` (`RssAnon`: the heap, stacks, the runtime's own), and
    /// the part backed by files (`RssFile`: code and data of the program and its libraries, which
    /// the kernel may drop and read again at any time); printed, to tell them apart.
    var anonymousKiB = 0
    var fileKiB = 0
    /// The process's threads (`Threads`), printed: each has a stack, and may have an arena.
    var threads = 0

    /// The sample now; zeros where `/proc` is missing.
    ///
    /// It first returns the free memory of every malloc arena to the kernel (`malloc_trim`), so
    /// that resident memory counts what the program holds. Without it, a burst's memory, freed
    /// again, stayed resident in the arena that served it: a 2-minute soak on BlueZ 5.82 ended
    /// with 2 MiB more anonymous memory than its middle (1,596 → 3,620 KiB) while the heap in use
    /// fell (667 → 639 KiB), and failed the growth criterion at 11.9 %.
    static func now() -> ProcessSample {
        malloc_trim(0)
        let status = (ProcFS.read("/proc/self/status") ?? "").split(separator: "\n")
        /// The number of a `Name:\t   1234 kB` or `Name:\t1234` line of the status (KiB for the
        /// former).
        func number(_ name: String) -> Int {
            status.first { $0.hasPrefix(name + ":") }
                .flatMap { Int($0.split(whereSeparator: \.isWhitespace).dropFirst().first ?? "") } ?? 0
        }
        let heap = mallinfo2()
        let targets = ProcFS.descriptorTargets()
        return ProcessSample(
            residentKiB: number("VmRSS"), heapInUseKiB: (heap.uordblks + heap.hblkhd) / 1024,
            openFileDescriptors: targets.count, fileDescriptorTargets: targets, anonymousKiB: number("RssAnon"),
            fileKiB: number("RssFile"), threads: number("Threads"))
    }

    var description: String {
        "\(residentKiB) KiB resident (\(anonymousKiB) anonymous, \(fileKiB) file-backed), \(heapInUseKiB) KiB heap in use,"
            + " \(openFileDescriptors) fds, \(threads) threads"
    }
}
