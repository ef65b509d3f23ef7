import Able
import Testing

extension RealBlueZ {
    /// `able pair`, `able devices`, `able forget` and `able notify --reconnect` as a user runs them,
    /// against an Able server on hci1.
    @Suite(.timeLimit(.minutes(3)))
    struct LifecycleCommands {
        let command = Command()

        @Test func pairListsTheBondInDevicesAndForgetRemovesIt() async throws {
            try await withRig { rig in
                try await rig.serving(Command.server) { _ in
                    let address = "\(rig.peripheralAddress)"
                    // hci1's side of the pairing asks the default agent about hci0, a device other
                    // than the one `able pair` pairs with: this process's standing agent on hci1 answers.
                    try await rig.peripheral.withPairingAgent(.justWorks, asSystemDefault: true) {
                        try await rig.advertising([Command.service], name: "cli") {
                            // hci0 has never seen hci1: pair finds it with a scan of its own.
                            let (paired, pairLines) = try await command.finish(
                                command.able(["pair", address, "--trust", "--adapter", Guest.central, "--json"]))
                            #expect(paired == 0, "\(pairLines)")
                            #expect(
                                pairLines.last
                                    == #"{"event":"paired","address":"\#(address)","bonded":true,"trusted":true}"#,
                                "\(pairLines)")
                        }
                    }
                    let (listed, lines) = try await command.finish(
                        command.able(["devices", "--adapter", Guest.central, "--json"]))
                    #expect(listed == 0, "\(lines)")
                    let device = try #require(lines.first { $0.contains(#""address":"\#(address)""#) }, "\(lines)")
                    #expect(device.contains(#""addressType":"public""#), "\(device)")
                    #expect(
                        device.contains(#""paired":true,"bonded":true,"trusted":true,"blocked":false"#), "\(device)")

                    let (forgot, forgetLines) = try await command.finish(
                        command.able(["forget", address, "--adapter", Guest.central, "--json"]))
                    #expect(forgot == 0, "\(forgetLines)")
                    let (_, after) = try await command.finish(
                        command.able(["devices", "--adapter", Guest.central, "--json"]))
                    #expect(!after.contains { $0.contains(address) }, "\(after)")
                    let (again, _) = try await command.finish(
                        command.able(["forget", address, "--adapter", Guest.central, "--json"]))
                    #expect(again == 1)
                }
            }
        }

        @Test func notifyReconnectComesBackAfterTheLinkDropsAndCountsOn() async throws {
            try await withRig { rig in
                try await rig.serving(Command.server) { _ in
                    let address = "\(rig.peripheralAddress)"
                    try await rig.advertising([Command.service], name: "cli") {
                        let child = try command.able([
                            "notify", address, "\(Command.counter)", "--reconnect", "--count", "6", "--adapter",
                            Guest.central, "--json",
                        ])
                        let notifications = {
                            child.output.split(separator: "\n").filter { $0.contains("notification") }
                        }
                        try await eventually("the first three values", timeout: .seconds(60)) {
                            notifications().count == 3
                        }
                        // hci1 ends the link; the server sends 1, 2, 3 again on the next subscription.
                        try await rig.peripheral.peripheral(address: rig.centralAddress).disconnect()
                        let (status, lines) = try await command.finish(child, timeout: .seconds(120))
                        #expect(status == 0, "\(lines)")
                        let events = lines.compactMap { line in
                            ["enabled", "notification", "interrupted", "end"].first {
                                line.contains(#""event":"\#($0)""#)
                            }
                        }
                        #expect(
                            events == [
                                "enabled", "notification", "notification", "notification", "interrupted", "enabled",
                                "notification", "notification", "notification", "end",
                            ], "\(lines)")
                    }
                }
            }
        }
    }
}
