import Able
import Testing

@testable import AbleCommand

/// The soak's verdict (`able soak`): each criterion fails the soak on its own.
struct SoakReportTests {
    static func sample(_ kib: Int, _ descriptors: [String] = ["socket:[1]", "anon_inode:[eventfd]"]) -> ProcessSample {
        ProcessSample(residentKiB: kib, openFileDescriptors: descriptors.count, fileDescriptorTargets: descriptors)
    }

    /// A ledger with every required kind completed and nothing wrong.
    static func healthyLedger() -> SoakLedger {
        let ledger = SoakLedger()
        for kind in SoakReport.requiredKinds { ledger.completed(kind) }
        ledger.failed("read", BluetoothError(.disconnected, message: "the link dropped"))
        return ledger
    }

    static func healthySamples() -> SoakSamples {
        SoakSamples(baseline: sample(10_000), warm: sample(12_000), middle: sample(12_500), end: sample(13_000))
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

    @Test func memoryGrowingTenPercentAfterWarmUpFails() {
        var samples = Self.healthySamples()
        samples.end = Self.sample(13_200)
        let report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.failures == ["resident memory grew 10.0 % after warm-up"])
    }

    @Test func aDescriptorLeftOpenFailsAndIsNamed() {
        var samples = Self.healthySamples()
        samples.end = Self.sample(12_000, ["socket:[1]", "anon_inode:[eventfd]", "socket:[7]"])
        let report = SoakReport(ledger: Self.healthyLedger(), samples: samples, maximumStall: .seconds(60))
        #expect(report.failures == ["open fds 3 at the end, 2 at the start"])
        #expect(report.lines.contains("  fds at the end: socket:[1] anon_inode:[eventfd] socket:[7]"))
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
        #expect(sample.openFileDescriptors >= 3, "\(sample.fileDescriptorTargets)")
        #expect(sample.openFileDescriptors == sample.fileDescriptorTargets.count)
    }
}
