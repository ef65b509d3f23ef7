import Able
import Foundation
import Testing

extension RealBlueZ {
    /// The `able` command's binary on real BlueZ: the demo with the server on hci1 and the central
    /// on hci0, and the tools against an Able server on hci1.
    @Suite(.timeLimit(.minutes(3)))
    struct Command {
        static let service: BluetoothUUID = "A5A50001-0000-1000-8000-00805F9B34FB"
        static let text: BluetoothUUID = "A5A50002-0000-1000-8000-00805F9B34FB"
        static let counter: BluetoothUUID = "A5A50003-0000-1000-8000-00805F9B34FB"

        /// A text characteristic and a counter that notifies 1, 2, 3 as soon as a central subscribes.
        static let server = GATTServerDefinition {
            Service(service) {
                Characteristic(text, properties: [.read, .write], value: Array("hi".utf8))
                Characteristic(counter, properties: .notify)
            }
            OnSubscriptionChange { server, _, uuid, isSubscribed in
                guard isSubscribed, uuid == counter else { return }
                for index: UInt8 in 1...3 {
                    try? await server.notify(CharacteristicID(counter, service: service), value: [index])
                }
            }
        }

        func able(_ arguments: [String]) throws -> ChildProcess {
            let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
                .appendingPathComponent("able").path
            try #require(
                FileManager.default.isExecutableFile(atPath: binary), "\(binary) is missing: run `swift build`")
            return try ChildProcess.start(binary, arguments)
        }

        /// Waits for `child` to exit (killing it after `timeout`) and returns its status and JSON lines.
        func finish(_ child: ChildProcess, timeout: Duration = .seconds(90)) async throws -> (Int32, [String]) {
            let status = try await withCleanup {
                try await withDeadline(timeout, waitingFor: "able to exit") { await child.exitStatus() }
            } cleanup: {
                child.kill()
            }
            return (status, child.output.split(separator: "\n").map(String.init))
        }

        @Test func theDemoRunsBetweenHci1AndHci0() async throws {
            try await withRig { _ in
                let child = try able(["demo", "--server", Guest.peripheral, "--central", Guest.central, "--json"])
                let (status, lines) = try await finish(child, timeout: .seconds(150))
                #expect(status == 0, "able demo exited with \(status):\n\(lines.joined(separator: "\n"))")
                let events = lines.compactMap { $0.split(separator: #""event":""#).last.map { String($0.dropLast(2)) } }
                #expect(events.contains { $0.hasPrefix("service A: read PSM 0x00") }, "\(events)")
                #expect(events.contains("notification 3 of 3: 03"), "\(events)")
                #expect(events.filter { $0.hasSuffix("bytes, got them echoed") }.count == 3, "\(events)")
                #expect(events.contains { $0.hasPrefix("L2CAP channel closed by the central after 3 echoes") })
                #expect(events.last == "done")
            }
        }

        @Test func scanReadWriteAndNotifyAgainstAnAbleServer() async throws {
            try await withRig { rig in
                try await rig.serving(Self.server) { server in
                    let address = "\(rig.peripheralAddress)"
                    try await eventually("hci0 not to be discovering") { await !rig.central.state.isDiscovering }
                    let scan = try able([
                        "scan", "--adapter", Guest.central, "--service", "\(Self.service)", "--count", "1",
                        "--timeout", "60", "--json",
                    ])
                    // The scan must run before hci1 advertises: the emulated controller reports once.
                    try await eventually("able scan to start discovery", timeout: .seconds(30)) {
                        await rig.central.state.isDiscovering
                    }
                    try await rig.advertising([Self.service], name: "cli") {
                        let (status, lines) = try await finish(scan)
                        #expect(status == 0, "\(lines)")
                        #expect(
                            lines.first?.hasPrefix(#"{"event":"discovery","address":"\#(address)""#) == true, "\(lines)"
                        )
                        #expect(lines.last == #"{"event":"end","count":1}"#, "\(lines)")

                        let (written, writeLines) = try await finish(
                            able([
                                "write", address, "\(Self.text)", "--text", "hello", "--adapter", Guest.central,
                                "--json",
                            ]))
                        #expect(written == 0, "\(writeLines)")
                        #expect(
                            await server.value(of: CharacteristicID(Self.text, service: Self.service))
                                == Array("hello".utf8))

                        let (info, infoLines) = try await finish(
                            able(["info", address, "--read", "--adapter", Guest.central, "--json"]))
                        #expect(info == 0, "\(infoLines)")
                        #expect(
                            infoLines.last?.contains(
                                #"{"uuid":"a5a50002-0000-1000-8000-00805f9b34fb","properties":["read","write"],"descriptors":[],"value":{"hex":"68656c6c6f","text":"hello"}}"#
                            ) == true, "\(infoLines)")

                        let (read, readLines) = try await finish(
                            able(["read", address, "\(Self.text)", "--adapter", Guest.central, "--json"]))
                        #expect(read == 0, "\(readLines)")
                        #expect(
                            readLines.last?.hasSuffix(#""value":{"hex":"68656c6c6f","text":"hello"}}"#) == true,
                            "\(readLines)")

                        let (notified, notifyLines) = try await finish(
                            able([
                                "notify", address, "\(Self.counter)", "--count", "3", "--adapter", Guest.central,
                                "--json",
                            ]))
                        #expect(notified == 0, "\(notifyLines)")
                        #expect(
                            notifyLines.filter { $0.hasPrefix(#"{"event":"notification""#) }.count == 3,
                            "\(notifyLines)")
                        #expect(notifyLines.last == #"{"event":"end","count":3}"#)
                        try await eventually("the subscription to stop") {
                            await !server.isSubscribed(CharacteristicID(Self.counter, service: Self.service))
                        }
                        try await eventually("hci0 to drop the link") {
                            await rig.bluezDevice("Connected", of: rig.peripheralOnCentral, as: Bool.self) != true
                        }
                    }
                }
            }
        }

        @Test func serveAnswersACentralOnHci0() async throws {
            try await withRig { rig in
                let child = try able([
                    "serve", "--adapter", Guest.peripheral, "--name", "served", "--duration", "60", "--json",
                ])
                try await withCleanup {
                    try await eventually("able serve to advertise", timeout: .seconds(30)) {
                        child.output.contains(#"{"event":"serving""#)
                    }
                    // The advertisement is up already: a scan now may miss its one report, so
                    // retry the scan a few times.
                    let discovery = try await poll(
                        every: .milliseconds(100), timeout: .seconds(60), waitingFor: "served"
                    ) {
                        () async -> Able.Discovery? in
                        guard let scan = try? await rig.central.scan(ScanFilter(namePrefix: "served")) else {
                            return nil
                        }
                        return try? await scan.first(timeout: .seconds(5))
                    }
                    try await rig.connected(to: discovery) { peripheral in
                        let level = try await peripheral.read(CharacteristicID(.batteryLevel, service: .batteryService))
                        #expect(level.count == 1)
                        try await peripheral.write(
                            Array("hey".utf8),
                            to: CharacteristicID(ServeCommandUUIDs.message, service: ServeCommandUUIDs.service))
                    }
                    try await eventually("able serve to report the write") {
                        child.output.contains(
                            #"{"event":"write","characteristic":"6e400002-b5a3-f393-e0a9-e50e24dcca9e","value":{"hex":"686579","text":"hey"}"#
                        )
                    }
                    _ = Glibc.kill(child.pid, SIGINT)
                    let (status, lines) = try await finish(child, timeout: .seconds(30))
                    #expect(status == 130, "\(lines)")
                    #expect(
                        lines.contains { $0.hasPrefix(#"{"event":"read","characteristic":"00002a19-"#) }, "\(lines)")
                    #expect(lines.last == #"{"event":"stopped"}"#, "\(lines)")
                    try await eventually("hci1 to stop advertising") {
                        try await rig.bus.bluezProperty(
                            "ActiveInstances", of: BlueZ.leAdvertisingManager1, at: BlueZ.adapterPath(Guest.peripheral),
                            as: UInt8.self) == 0
                    }
                } cleanup: {
                    child.kill()
                }
            }
        }

        @Test func l2capConnectTalksToL2CAPListenAcrossTheRadio() async throws {
            try await withRig { rig in
                let listener = try able(["l2cap", "listen", "--adapter", Guest.peripheral, "--channels", "1", "--json"])
                try await withCleanup {
                    try await eventually("able l2cap listen to listen", timeout: .seconds(30)) {
                        child(listener, printed: #"{"event":"listening","psm":"#)
                    }
                    let psm = try #require(
                        listener.output.split(separator: "\n").first?.split(separator: ":").last?.dropLast())
                    let services = [BluetoothUUID.random()]
                    try await rig.discovering(services, name: "l2") { discovery in
                        let (status, lines) = try await finish(
                            able([
                                "l2cap", "connect", "\(discovery.address)", String(psm), "--adapter", Guest.central,
                                "--count", "2", "--message", "ping", "--json",
                            ]))
                        #expect(status == 0, "\(lines)")
                        #expect(
                            lines.filter { $0.contains(#""value":{"hex":"70696e67","text":"ping"},"echoed":true"#) }
                                .count
                                == 2, "\(lines)")
                    }
                    let (status, lines) = try await finish(listener, timeout: .seconds(30))
                    #expect(status == 0, "\(lines)")
                    #expect(lines.last == #"{"event":"closed","channel":1,"echoed":2}"#, "\(lines)")
                } cleanup: {
                    listener.kill()
                }
            }
        }

        func child(_ process: ChildProcess, printed prefix: String) -> Bool {
            process.output.split(separator: "\n").contains { $0.hasPrefix(prefix) }
        }

        @Test func ctrlCStopsNotifyCleanly() async throws {
            try await withRig { rig in
                try await rig.serving(Self.server) { server in
                    try await rig.discovering([Self.service], name: "cli") { discovery in
                        let child = try able([
                            "notify", "\(discovery.address)", "\(Self.counter)", "--adapter", Guest.central,
                        ])
                        try await withCleanup {
                            try await eventually("able notify to subscribe", timeout: .seconds(60)) {
                                await server.isSubscribed(CharacteristicID(Self.counter, service: Self.service))
                            }
                            try await eventually("the three values to be printed") {
                                child.output.contains("3: 03")
                            }
                            _ = Glibc.kill(child.pid, SIGINT)
                            let (status, lines) = try await finish(child, timeout: .seconds(30))
                            #expect(status == 130, "\(lines)")
                            try await eventually("the subscription to stop") {
                                await !server.isSubscribed(CharacteristicID(Self.counter, service: Self.service))
                            }
                            try await eventually("hci0 to drop the link") {
                                await rig.bluezDevice("Connected", of: rig.peripheralOnCentral, as: Bool.self) != true
                            }
                        } cleanup: {
                            child.kill()
                        }
                    }
                }
            }
        }
    }
}

/// The UUIDs `able serve` serves (Sources/AbleCommand/Commands/ServeCommand.swift).
enum ServeCommandUUIDs {
    static let service: BluetoothUUID = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
    static let message: BluetoothUUID = "6E400002-B5A3-F393-E0A9-E50E24DCCA9E"
}
