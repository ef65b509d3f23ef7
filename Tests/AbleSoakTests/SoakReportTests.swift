import Able
import AbleTestSupport
import Glibc
import Testing

@testable import AbleSoak

/// The soak's verdict (`able-soak`): each criterion fails the soak on its own.
struct SoakReportTests {
    static func sample(
        _ kib: Int, heap: Int? = nil, _ descriptors: [String] = ["socket:[1]", "anon_inode:[eventfd]"]
    ) -> ProcessSample {
        ProcessSample(
            residentKiB: kib, heapInUseKiB: heap ?? kib / 4, openFileDescriptors: descriptors.count,
            fileDescriptorTargets: descriptors)
    }

    static func growthLine(_ percent: String) -> String {
        "resident memory growth over the second half, against the first half's peak: " + percent
    }

    /// A ledger with every required kind completed and nothing wrong.
    static func healthyLedger() -> SoakLedger {
        let ledger = SoakLedger()
        for kind in SoakReport.requiredKinds { ledger.completed(kind) }
        ledger.failed("read", BluetoothError(.disconnected, message: "the link dropped"))
        return ledger
    }

    static func healthySamples() -> SoakSamples {
        SoakSamples(baseline: sample(10_000), quarter: sample(12_000), middle: sample(12_500), end: sample(13_000))
    }

    @Test func aSoakWithTypedErrorsOnlyPasses() {
        let report = SoakReport(
            ledger: Self.healthyLedger(), samples: Self.healthySamples(), maximumStall: .seconds(60))
        #expect(report.failures.isEmpty, "\(report.failures)")
        #expect(report.lines.last == "verdict: PASS")
        #expect(report.lines.contains("errors: read: disconnected 1"))
        #expect(report.lines.contains("  first read: disconnected: the link dropped"))
    }

    @Test func anUntypedErrorFails() {
        struct Odd: Error {}
        let ledger = Self.healthyLedger()
        ledger.failed("write", Odd())
        let report = SoakReport(ledger: ledger, samples: Self.healthySamples(), maximumStall: .seconds(60))
        #expect(report.failures == ["1 untyped errors"])
    }

    @Test func lostOrDuplicatedValuesFail() {
        let ledger = Self.healthyLedger()
        ledger.lost("notification", 3)
        ledger.duplicated("l2cap echo")
        let report = SoakReport(ledger: ledger, samples: Self.healthySamples(), maximumStall: .seconds(60))
        #expect(report.failures == ["values lost: notification 3", "values duplicated: l2cap echo 1"])
    }

    @Test func anOperationThatNeverCompletedFails() {
        let ledger = SoakLedger()
        for kind in SoakReport.requiredKinds where kind != "l2cap echo" { ledger.completed(kind) }
        let report = SoakReport(ledger: ledger, samples: Self.healthySamples(), maximumStall: .seconds(60))
        #expect(report.failures == ["no l2cap echo completed"])
    }

    @Test func residentMemoryGrowingTenPercentOverTheSecondHalfFails() {
        var samples = Self.healthySamples()
        samples.end = Self.sample(13_750)
        let report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.failures == ["resident memory grew 10.0 % past the first half's peak"])
        #expect(report.lines.contains("resident memory (KiB): start 10000, quarter 12000, middle 12500, end 13750"))
        #expect(report.lines.contains("heap in use (KiB): start 2500, quarter 3000, middle 3125, end 3437"))
    }

    /// The first half is the warm-up: what grows in it (code paged in by the first recovery) does
    /// not count, nor does the heap in use, which follows what bluetoothd exports.
    @Test func growthDuringTheWarmUpOrOfTheHeapAlonePasses() {
        let samples = SoakSamples(
            baseline: Self.sample(10_000), quarter: Self.sample(12_000), middle: Self.sample(14_000, heap: 3_000),
            end: Self.sample(14_100, heap: 3_900))
        let report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.failures.isEmpty, "\(report.failures)")
        #expect(report.lines.contains(Self.growthLine("0.7 %")))
    }

    /// Resident memory that fell by the middle (file-backed pages dropped, memory given back to
    /// the system) and rose again is measured against the first half's peak: the figures of a
    /// 2-minute soak on BlueZ 5.82 whose heap in use fell over the second half.
    @Test func memoryTakenBackAndTakenAgainIsNotGrowth() {
        let samples = SoakSamples(
            baseline: Self.sample(12_660, heap: 235), quarter: Self.sample(16_524, heap: 586),
            middle: Self.sample(14_644, heap: 666), end: Self.sample(16_668, heap: 631))
        let report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.failures.isEmpty, "\(report.failures)")
        #expect(report.lines.contains(Self.growthLine("0.9 %")))
    }

    /// Growth past the first half's peak fails, whichever sample held the peak.
    @Test func growthPastTheQuarterPeakFails() {
        let samples = SoakSamples(
            baseline: Self.sample(10_000), quarter: Self.sample(14_000), middle: Self.sample(12_000),
            end: Self.sample(15_400))
        let report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.failures == ["resident memory grew 10.0 % past the first half's peak"])
    }

    @Test func theAnonymousAndFileBackedPartsArePrinted() {
        var end = Self.sample(13_000)
        (end.anonymousKiB, end.fileKiB) = (4_000, 9_000)
        var samples = Self.healthySamples()
        samples.end = end
        let report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.lines.contains("  of it anonymous (KiB): start 0, quarter 0, middle 0, end 4000"))
        #expect(report.lines.contains("  of it file-backed (KiB): start 0, quarter 0, middle 0, end 9000"))
    }

    @Test func aDescriptorLeftOpenFailsAndIsNamed() {
        var samples = Self.healthySamples()
        samples.end = Self.sample(12_000, ["socket:[1]", "anon_inode:[eventfd]", "socket:[7]"])
        let report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.failures == ["open fds 3 at the end, 2 at the start (besides libdispatch's timerfds)"])
        #expect(report.lines.contains("  fds at the end: socket:[1] anon_inode:[eventfd] socket:[7]"))
    }

    /// libdispatch opens a timerfd per clock when a timer first needs it, and keeps it: one more at
    /// the end is not a leak, a fourth is not libdispatch's.
    @Test func libdispatchsTimerDescriptorsAreNotCountedUpToOnePerClock() {
        var samples = Self.healthySamples()
        let timer = SoakReport.timerDescriptor
        samples.baseline = Self.sample(10_000, ["socket:[1]", timer])
        samples.end = Self.sample(12_000, ["socket:[1]", timer, timer, timer])
        var report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.failures.isEmpty, "\(report.failures)")

        samples.end = Self.sample(12_000, ["socket:[1]", timer, timer, timer, timer])
        report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.failures == ["4 timerfds at the end: libdispatch opens at most 3"])
    }

    @Test func aStallLongerThanAllowedFails() {
        let ledger = Self.healthyLedger()
        ledger.finish(at: ledger.start + .seconds(90))
        let report = SoakReport(ledger: ledger, samples: Self.healthySamples(), maximumStall: .seconds(60))
        #expect(report.failures.count == 1)
        #expect(report.failures.first?.hasPrefix("a stall of") == true, "\(report.failures)")
    }

    @Test func aMaintainedConnectionThatGaveUpFails() {
        let ledger = Self.healthyLedger()
        ledger.failed("connection gave up", BluetoothError(.failed, message: "refused"))
        let report = SoakReport(ledger: ledger, samples: Self.healthySamples(), maximumStall: .seconds(60))
        #expect(report.failures == ["the maintained connection gave up 1 times"])
    }

    @Test func theProcessIsSampledFromProc() {
        let sample = ProcessSample.now()
        #expect(sample.residentKiB > 0)
        #expect(sample.anonymousKiB > 0 && sample.fileKiB > 0)
        #expect(sample.anonymousKiB + sample.fileKiB <= sample.residentKiB)
        #expect(sample.openFileDescriptors >= 3, "\(sample.fileDescriptorTargets)")
        #expect(sample.openFileDescriptors == sample.fileDescriptorTargets.count)
        #expect(sample.threads >= 1)
    }

    @Test(
        .disabled(
            if: Sanitizers.isAddressSanitizerActive || Sanitizers.isThreadSanitizerActive,
            "a sanitizer's allocator keeps freed memory in its own quarantine, which malloc_trim does not reach"))
    func memoryFreedAfterABurstIsNotCountedAsResident() throws {
        let before = ProcessSample.now().anonymousKiB
        // 64 MiB in small chunks, written to, all freed but the last, which stays above them:
        // free() cannot give the burst back from the top of the heap, so only the sample's trim
        // can. Half of it is the margin for what the suite's other tests allocate meanwhile.
        var burst: [UnsafeMutableRawPointer] = []
        for _ in 0..<65_536 {
            let chunk = try #require(malloc(1024))
            memset(chunk, 1, 1024)
            burst.append(chunk)
        }
        let pin = burst.removeLast()
        defer { free(pin) }
        for chunk in burst { free(chunk) }
        let after = ProcessSample.now().anonymousKiB
        #expect(after < before + 32 * 1024, "anonymous memory \(before) KiB before the burst, \(after) KiB after")
    }
}
