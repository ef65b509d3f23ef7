import Able
import AbleBlueZ
import AbleScenarios
import Foundation
import Testing

extension RealBlueZ {
    /// The advertising scenarios on real BlueZ: Able advertises on hci1, Able scans on hci0.
    @Suite(.timeLimit(.minutes(3)))
    struct AdvertisingScenarios {
        @Test(arguments: AdvertisingScenario.allCases)
        func scenario(_ scenario: AdvertisingScenario) async throws {
            guard scenario != .beaconFollowedValueByValue || Guest.bluezVersion.map({ $0 > .init(5, 66) }) == true
            else {
                // Once in the guest on 5.66, with the host's cores busy, the beacon's values were
                // on the air and in hci0's reports (btmon) but no value reached the scan; it passed
                // in every run since (7 on 2026-12-01). Not understood yet, so known there.
                await withKnownIssue(
                    "a duplicates scan missed a broadcast beacon's reports on BlueZ 5.66", isIntermittent: true
                ) {
                    try await withRig { rig in try await scenario.run(on: BlueZScenarioBackend(rig: rig)) }
                }
                return
            }
            try await withRig { rig in try await scenario.run(on: BlueZScenarioBackend(rig: rig)) }
        }
    }

    /// What Able advertises, checked in `btmon`'s decoded HCI trace, independently of Able's scanner.
    @Suite(.timeLimit(.minutes(2)))
    struct AdvertisingTrace {
        @Test func everyDataFieldIsSentAndReceivedAsBtmonDecodesIt() async throws {
            let logDirectory = try #require(ProcessInfo.processInfo.environment["ABLE_BLUEZ_LOG_DIR"])
            try await withRig { rig in
                let marker = UInt8.random(in: 16...255)
                let hex = String(marker, radix: 16)
                let scan = try await rig.central.scan(
                    ScanFilter(namePrefix: "air\(marker)", manufacturerIDs: [AdvertisingScenario.testCompany]))
                let advertising = try await rig.peripheral.startAdvertising(
                    AdvertisingScenario.everyField(marker: marker))
                try await withCleanup {
                    _ = try await scan.first(timeout: Rig.discoveryTimeout)
                    // btmon prints the host's LE Set Advertising Data and Set Scan Response Data
                    // commands and the controller's LE Advertising Reports, each field decoded.
                    let expected = [
                        // btmon 5.66 prints "Data: …", 5.82 "Data[N]: …".
                        "Company: internal use (65535)", ": a1\(hex)0304",
                        "Environmental Sensing (0x181a)", ": \(hex)2233",
                        "Name (complete): air\(marker)", "(0x0341)", "TX power:",
                    ]
                    try await eventually("btmon to show every field", timeout: .seconds(20)) {
                        let trace = Self.trace(in: logDirectory)
                        return expected.allSatisfy { trace.contains($0) }
                    }
                } cleanup: {
                    await advertising.stop()
                    let trace = Self.trace(in: logDirectory)
                    for text in [": a1\(hex)0304", "Name (complete): air\(marker)"] where !trace.contains(text) {
                        Issue.record("btmon's trace lacks \(text)")
                    }
                }
            }
        }

        /// Every decoded btmon text file of this run, concatenated.
        static func trace(in directory: String) -> String {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            return files.filter { $0.hasPrefix("btmon.") && $0.hasSuffix(".txt") }.sorted().compactMap {
                try? String(contentsOfFile: directory + "/" + $0, encoding: .utf8)
            }.joined(separator: "\n")
        }
    }
}
