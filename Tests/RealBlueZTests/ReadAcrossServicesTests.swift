import Able
import AbleScenarios
import Foundation
import Testing

extension RealBlueZ {
    /// The seed-002 scenario (`Snippets/ReadAcrossServices.swift`): read A1 of service A and B1 of
    /// service B, then take exactly B1's first byte of notifications of B2, leaving nothing
    /// subscribed. Able's server on hci1 plays the peripheral; the central runs in this process,
    /// then as the snippet's own binary.
    @Suite(.timeLimit(.minutes(2)))
    struct ReadAcrossServices {
        /// B1 says 3; the server notifies B2 three times as soon as a central subscribes.
        static let server = GATTServerDefinition {
            Service(SeedService.a) { Characteristic(SeedCharacteristic.a1, properties: [.read], value: [0xA1]) }
            Service(SeedService.b) {
                Characteristic(SeedCharacteristic.b1, properties: [.read])
                Characteristic(SeedCharacteristic.b2, properties: [.notify])
            }
            OnRead(SeedCharacteristic.b1, answering: .immediately) { _ in [3] }
            OnSubscriptionChange { server, _, uuid, isSubscribed in
                guard uuid == SeedCharacteristic.b2.uuid, isSubscribed else { return }
                for value in 1...3 { try? await server.notify(SeedCharacteristic.b2, value: [UInt8(value)]) }
            }
        }

        static let scanFilter = ScanFilter(serviceUUIDs: [SeedService.a.uuid, SeedService.b.uuid])

        @Test func inThisProcess() async throws {
            try await withRig { rig in
                try await rig.serving(Self.server) { server in
                    try await rig.discovering([SeedService.a.uuid], filter: Self.scanFilter) { discovery in
                        try await rig.connected(to: discovery) { peripheral in
                            #expect(try await peripheral.read(SeedCharacteristic.a1) == [0xA1])
                            let b1 = try await peripheral.read(SeedCharacteristic.b1)
                            try #require(b1 == [3])
                            let values = try await withDeadline(.seconds(15), waitingFor: "B1 notifications of B2") {
                                var values: [[UInt8]] = []
                                let stream = try await peripheral.notifications(of: SeedCharacteristic.b2)
                                for try await value in stream.prefix(Int(b1[0])) { values.append(value) }
                                return values
                            }
                            #expect(values == [[1], [2], [3]])
                            try await eventually("the server to see B2's subscription stop") {
                                await !server.isSubscribed(SeedCharacteristic.b2)
                            }
                            #expect(await peripheral.isConnected)
                        }
                    }
                }
            }
        }

        @Test func theSnippetBinary() async throws {
            let snippet = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("ReadAcrossServices").path
            try #require(
                FileManager.default.isExecutableFile(atPath: snippet),
                "\(snippet) is missing: `swift build` builds it (`--product AblePackageTests` does not)")
            try await withRig { rig in
                try await rig.serving(Self.server) { server in
                    try await eventually("hci0 not to be discovering") { await !rig.central.state.isDiscovering }
                    let child = try ChildProcess.start(snippet, [Guest.central, "30"])
                    let status = try await withCleanup {
                        // The snippet must be scanning before hci1 advertises (one-shot reports).
                        try await eventually("the snippet to start scanning", timeout: .seconds(30)) {
                            await rig.central.state.isDiscovering
                        }
                        return try await rig.advertising([SeedService.a.uuid], name: "seed") {
                            try await withDeadline(.seconds(60), waitingFor: "the snippet to exit") {
                                await child.exitStatus()
                            }
                        }
                    } cleanup: {
                        child.kill()
                    }
                    let output = child.output
                    #expect(status == 0, "ReadAcrossServices exited with \(status):\n\(output)")
                    let lines = output.split(separator: "\n").map(String.init)
                    #expect(lines.first?.hasPrefix("found \(rig.peripheralAddress)") == true, "\(output)")
                    #expect(lines.contains("A1 = [161], B1 = [3]"), "\(output)")
                    #expect(lines.filter { $0.hasPrefix("B2 notified") } == (1...3).map { "B2 notified [\($0)]" })
                    #expect(lines.last == "took 3 notifications; the subscription ended with the loop", "\(output)")
                    try await eventually("the server to see B2's subscription stop") {
                        await !server.isSubscribed(SeedCharacteristic.b2)
                    }
                }
            }
        }
    }
}
