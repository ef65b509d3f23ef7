/// The end of a soak: the figures, and the criteria each passes or fails (see ``SoakCommand``).
struct SoakReport: Sendable {
    /// The kinds of operation each of which must have completed at least once.
    static let requiredKinds = ["read", "write", "notification", "l2cap echo"]
    /// The most resident memory may grow after warming up, as a fraction.
    static let allowedGrowth = 0.10

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

        let all = [samples.baseline, samples.warm, samples.middle, samples.end]
        func row(_ name: String, _ value: (ProcessSample) -> Int) -> String {
            "\(name): "
                + zip(["start", "warm", "middle", "end"], all)
                .map { "\($0) \($1.map { "\(value($0))" } ?? "-")" }.joined(separator: ", ")
        }
        lines.append(row("resident memory (KiB)", \.residentKiB))
        lines.append(row("open fds", \.openFileDescriptors))
        if let warm = samples.warm, let end = samples.end, warm.residentKiB > 0 {
            let growth = Double(end.residentKiB - warm.residentKiB) / Double(warm.residentKiB)
            lines.append("memory growth after warm-up: \((growth * 100).formatted(places: 1)) %")
            if growth >= Self.allowedGrowth {
                failures.append("resident memory grew \((growth * 100).formatted(places: 1)) % after warm-up")
            }
        } else {
            failures.append("memory not sampled")
        }
        if let end = samples.end, end.openFileDescriptors != samples.baseline.openFileDescriptors {
            lines.append("  fds at the start: " + samples.baseline.fileDescriptorTargets.joined(separator: " "))
            lines.append("  fds at the end: " + end.fileDescriptorTargets.joined(separator: " "))
            failures.append(
                "open fds \(end.openFileDescriptors) at the end, \(samples.baseline.openFileDescriptors) at the start")
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
}
