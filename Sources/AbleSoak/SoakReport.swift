import AbleCommand

/// The end of a soak: the figures, and the criteria each passes or fails (see ``SoakCommand``).
struct SoakReport: Sendable {
    /// The kinds of operation each of which must have completed at least once.
    static let requiredKinds = ["read", "write", "notification", "l2cap echo"]
    /// The most resident memory may grow over the second half of the soak, as a fraction of the
    /// most it held in the first half (a quarter of the way or in the middle).
    ///
    /// The first half is the warm-up: its faults (one every 20–30 s, a bluetoothd restart first)
    /// run the recovery paths for the first time, which pages in their code and sizes caches and
    /// buffers once. Growth after that is a leak's. (A 2-minute soak that ended its warm-up at a
    /// quarter, before the first fault, failed at 15 %: all of it across the first bluetoothd
    /// restart, and none after.)
    ///
    /// The measure is against the first half's peak, not the middle alone, because resident memory
    /// also falls: the kernel drops file-backed pages (the program's and its libraries' code, most
    /// of its resident memory) and reads them again when they are next run. A 2-minute soak on
    /// BlueZ 5.82 read 16,524 KiB a quarter of the way, 14,644 in the middle and 16,668 at the end,
    /// with the heap in use falling from 666 to 631 KiB over the second half: 13.8 % above the
    /// middle, 0.9 % above the peak. The dip was file-backed: the same soak's anonymous memory is
    /// 1.1–1.5 MiB in all, its file-backed 11.7–13.3 MiB (the split is printed since). A leak grows
    /// the anonymous part, and still grows resident memory past the peak. The free memory of
    /// malloc's arenas is handed back before each sample (``ProcessSample/now()`` says why), so
    /// the anonymous part is what the program holds: its heap in use, its stacks, the runtime's.
    ///
    /// The heap in use is printed beside it, not judged: it follows what bluetoothd exports, which
    /// Able's object tree mirrors (a connected device's GATT objects are about 100 KiB of it), so
    /// it moves by a fifth between two moments of a healthy soak.
    static let allowedGrowth = 0.10

    /// libdispatch opens a `timerfd` for each of its clocks (wall, uptime, monotonic) the first
    /// time a timer needs one and keeps it for the process's life; Able opens none. The
    /// descriptors at the end are compared with the baseline without them, and more than these
    /// three fail.
    static let dispatchClocks = 3
    static let timerDescriptor = "anon_inode:[timerfd]"

    var lines: [String] = []
    var failures: [String] = []

    init(ledger: SoakLedger, samples: SoakSamples, maximumStall: Duration) {
        let operations = ledger.operations
        lines.append("operations: " + Self.list(operations))
        for kind in Self.requiredKinds where operations[kind, default: 0] == 0 {
            failures.append("no \(kind) completed")
        }
        let errors = ledger.errors
        lines.append("errors: " + Self.list(errors))
        for (kind, message) in ledger.errorExamples.sorted(by: { $0.key < $1.key }) {
            lines.append("  first \(kind): \(message)")
        }
        let untyped = ledger.untyped
        lines.append("untyped errors: \(untyped.count)")
        for error in untyped.prefix(10) { lines.append("  untyped: \(error)") }
        if !untyped.isEmpty { failures.append("\(untyped.count) untyped errors") }
        let lost = ledger.lostValues
        let duplicated = ledger.duplicatedValues
        lines.append("values lost on surviving paths: " + Self.list(lost))
        lines.append("values duplicated on surviving paths: " + Self.list(duplicated))
        if !lost.isEmpty { failures.append("values lost: \(Self.list(lost))") }
        if !duplicated.isEmpty { failures.append("values duplicated: \(Self.list(duplicated))") }

        let all = [samples.baseline, samples.quarter, samples.middle, samples.end]
        func row(_ name: String, _ value: (ProcessSample) -> Int) -> String {
            "\(name): "
                + zip(["start", "quarter", "middle", "end"], all)
                .map { "\($0) \($1.map { "\(value($0))" } ?? "-")" }.joined(separator: ", ")
        }
        lines.append(row("resident memory (KiB)", \.residentKiB))
        lines.append(row("  of it anonymous (KiB)", \.anonymousKiB))
        lines.append(row("  of it file-backed (KiB)", \.fileKiB))
        lines.append(row("heap in use (KiB)", \.heapInUseKiB))
        lines.append(row("open fds", \.openFileDescriptors))
        lines.append(row("threads", \.threads))
        if let middle = samples.middle, let end = samples.end, middle.residentKiB > 0 {
            let peak = max(middle.residentKiB, samples.quarter?.residentKiB ?? 0)
            let growth = Double(end.residentKiB - peak) / Double(peak)
            let percent = (growth * 100).formatted(places: 1)
            lines.append("resident memory growth over the second half, against the first half's peak: \(percent) %")
            if growth >= Self.allowedGrowth {
                failures.append("resident memory grew \(percent) % past the first half's peak")
            }
        } else {
            failures.append("memory not sampled")
        }
        if let end = samples.end {
            let (atStart, atEnd) = (Self.counted(samples.baseline), Self.counted(end))
            let timers = end.fileDescriptorTargets.count { $0 == Self.timerDescriptor }
            if atEnd != atStart || timers > Self.dispatchClocks {
                lines.append("  fds at the start: " + samples.baseline.fileDescriptorTargets.joined(separator: " "))
                lines.append("  fds at the end: " + end.fileDescriptorTargets.joined(separator: " "))
                failures.append(
                    timers > Self.dispatchClocks
                        ? "\(timers) timerfds at the end: libdispatch opens at most \(Self.dispatchClocks)"
                        : "open fds \(atEnd) at the end, \(atStart) at the start (besides libdispatch's timerfds)")
            }
        }
        let gaveUp = ledger.errors.filter { $0.key.hasPrefix("connection gave up") }.values.reduce(0, +)
        if gaveUp > 0 { failures.append("the maintained connection gave up \(gaveUp) times") }
        let stall = ledger.longestStall
        lines.append(
            "longest stall: \(stall.duration.seconds.formatted(places: 1)) s (ended \(stall.endedAfter.seconds.formatted(places: 1)) s in)"
        )
        if stall.duration > maximumStall {
            failures.append("a stall of \(stall.duration.seconds.formatted(places: 1)) s (at most \(maximumStall))")
        }
        lines.append(failures.isEmpty ? "verdict: PASS" : "verdict: FAIL: " + failures.joined(separator: "; "))
    }

    private static func list(_ counts: [String: Int]) -> String {
        counts.isEmpty
            ? "none" : counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }

    /// How many of a sample's descriptors count: all but libdispatch's timerfds.
    private static func counted(_ sample: ProcessSample) -> Int {
        sample.fileDescriptorTargets.count { $0 != timerDescriptor }
    }
}
