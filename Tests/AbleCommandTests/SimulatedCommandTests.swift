import Able
import AbleSimulator
import Foundation
import Testing

@testable import AbleCommand

/// Each subcommand's `--json` output, run in-process against adapters on a simulated radio: a
/// peripheral adapter serving a GATT server, and the central adapter the command uses.
@Suite("able's subcommands on the simulated radio", .timeLimit(.minutes(1)))
struct SimulatedCommandTests {
    static let service: BluetoothUUID = "A5A50001-0000-1000-8000-00805F9B34FB"
    static let text: BluetoothUUID = "A5A50002-0000-1000-8000-00805F9B34FB"
    static let counter: BluetoothUUID = "A5A50003-0000-1000-8000-00805F9B34FB"

    let radio = SimulatedRadio()
    let central: Adapter
    let peripheral: Adapter

    init() {
        central = radio.makeAdapter(name: "sim-central")
        peripheral = radio.makeAdapter(name: "sim-peripheral")
    }

    var peripheralAddress: String { "5A:00:00:00:00:02" }

    /// Runs `able` with `arguments` and `--json` (without it when `json` is false: then `json`
    /// holds the text lines), every adapter name meaning `adapter` (by default the central).
    func able(_ arguments: [String], on adapter: Adapter? = nil, json: Bool = true) async -> (
        status: Int32, json: [String], errors: [String]
    ) {
        let (console, output) = Console.capturing(json: json)
        let adapter = adapter ?? central
        let context = CommandContext(console: console, adapter: { _ in adapter }, simulatedPair: SimulatedPair.make)
        let status = await AbleCommand.run(arguments + (json ? ["--json"] : []), context: context)
        return (status, output.out, output.error)
    }

    /// A server on the peripheral adapter: a text characteristic (read, write) and a counter
    /// that sends three notifications when subscribed.
    func withServer<T>(_ body: (GATTServer) async throws -> T) async throws -> T {
        let server = try await GATTServer.start(on: peripheral) {
            Service(Self.service) {
                Characteristic(Self.text, properties: [.read, .write], value: Array("hi".utf8))
                Characteristic(Self.counter, properties: .notify)
            }
            OnSubscriptionChange { server, _, uuid, isSubscribed in
                guard isSubscribed, uuid == Self.counter else { return }
                for index: UInt8 in 1...3 {
                    try? await server.notify(CharacteristicID(Self.counter, service: Self.service), value: [index])
                }
            }
        }
        let advertising = try await peripheral.startAdvertising(
            Advertisement(localName: "sim-thing", serviceUUIDs: [Self.service]))
        do {
            let result = try await body(server)
            await advertising.stop()
            await server.close()
            return result
        } catch {
            await advertising.stop()
            await server.close()
            throw error
        }
    }

    @Test("scan prints one discovery object per device and an end object with the count")
    func scan() async throws {
        try await radio.run {
            try await withServer { _ in
                let result = await able(["scan", "--service", "\(Self.service)", "--count", "1", "--timeout", "5"])
                #expect(result.status == 0, "\(result.errors)")
                #expect(result.json.count == 2)
                #expect(result.json.first?.hasPrefix(#"{"event":"discovery","address":"5A:00:00:00:00:02","#) == true)
                #expect(result.json.first?.contains(#""name":"sim-thing""#) == true)
                #expect(result.json.first?.contains(#""services":["a5a50001-0000-1000-8000-00805f9b34fb"]"#) == true)
                #expect(result.json.last == #"{"event":"end","count":1}"#)
            }
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test("advertise sends every field given, scan prints them and filters by manufacturer")
    func advertiseAndScan() async throws {
        let advertise = Task {
            await able(
                [
                    "advertise", "--name", "cli", "--service", "181A", "--service-data", "181A=0102",
                    "--manufacturer", "0xFFFF=a1b2", "--appearance", "0x0341", "--tx-power", "--duration", "600",
                ], on: peripheral)
        }
        // The scan's timeout runs on the radio's clock, which jumps: start it once the set runs.
        while try await peripheral.advertisingCapabilities().activeInstances == 0 {
            try await Task.sleep(for: .milliseconds(10))
        }
        let result = await able(["scan", "--manufacturer", "0xffff", "--count", "1", "--timeout", "3"])
        #expect(result.status == 0, "\(result.errors)")
        let discovery = try #require(result.json.first)
        #expect(discovery.contains(#""new":true,"name":"cli""#), "\(discovery)")
        #expect(discovery.contains(#""txPower":0,"appearance":833,"flags":6"#), "\(discovery)")
        #expect(
            discovery.contains(
                #""serviceData":{"0000181a-0000-1000-8000-00805f9b34fb":"0102"},"manufacturerData":{"65535":"a1b2"}"#),
            "\(discovery)")
        advertise.cancel()
        let advertised = await advertise.value
        #expect(
            advertised.json == [
                #"{"event":"advertising","adapter":"sim-peripheral","advertisingDataLength":26,"scanResponseLength":5}"#,
                #"{"event":"stopped"}"#,
            ])
        #expect(radio.openResources.isEmpty)
    }

    @Test("advertise refuses data that does not fit, with the bytes used and available")
    func advertiseRefusesTooMuch() async {
        let result = await able(
            ["advertise", "--manufacturer", "1=" + String(repeating: "ab", count: 25)], on: peripheral)
        #expect(result.status == 1)
        #expect(result.errors.joined().contains("needs 32 bytes; 31 are available"), "\(result.errors)")
    }

    @Test("advertise --capabilities prints what the adapter can advertise")
    func advertiseCapabilities() async {
        let result = await able(["advertise", "--capabilities"], on: peripheral)
        #expect(result.status == 0)
        #expect(
            result.json == [
                #"{"event":"capabilities","adapter":"sim-peripheral","availableInstances":5,"activeInstances":0,"#
                    + #""maximumAdvertisingDataLength":31,"maximumScanResponseLength":31,"#
                    + #""includes":["appearance","local-name","tx-power"],"secondaryChannels":[],"canSetTxPower":false,"#
                    + #""supportsParameters":true,"supportsScanResponseData":false}"#
            ])
    }

    @Test("info without an address describes the adapter")
    func adapterInfo() async {
        await radio.run {
            let result = await able(["info"])
            #expect(result.status == 0)
            #expect(
                result.json == [
                    #"{"event":"adapter","name":"sim-central","address":"5A:00:00:00:00:01","alias":"sim-central","powered":true,"discoverable":false,"pairable":true,"discovering":false}"#
                ])
        }
    }

    @Test("info with an address lists the services, with --read their values, and disconnects")
    func peripheralInfo() async throws {
        try await radio.run {
            try await withServer { _ in
                let result = await able(["info", peripheralAddress, "--read"])
                #expect(result.status == 0, "\(result.errors)")
                let line = try #require(result.json.first)
                #expect(line.hasPrefix(#"{"event":"peripheral","address":"5A:00:00:00:00:02","services":["#))
                #expect(
                    line.contains(
                        #"{"uuid":"a5a50002-0000-1000-8000-00805f9b34fb","properties":["read","write"],"descriptors":[],"value":{"hex":"6869","text":"hi"}}"#
                    ))
            }
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test("read prints the value as hex and text; write stores it")
    func readAndWrite() async throws {
        try await radio.run {
            try await withServer { server in
                let written = await able(["write", peripheralAddress, "\(Self.text)", "--text", "hello"])
                #expect(written.status == 0, "\(written.errors)")
                #expect(
                    written.json.first?.contains(#""value":{"hex":"68656c6c6f","text":"hello"},"withResponse":true"#)
                        == true)
                #expect(
                    await server.value(of: CharacteristicID(Self.text, service: Self.service)) == Array("hello".utf8))
                let read = await able(["read", peripheralAddress, "\(Self.text)"])
                #expect(read.status == 0, "\(read.errors)")
                #expect(
                    read.json == [
                        #"{"event":"value","address":"5A:00:00:00:00:02","characteristic":"a5a50002-0000-1000-8000-00805f9b34fb","value":{"hex":"68656c6c6f","text":"hello"}}"#
                    ])
            }
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test("read of a characteristic the peripheral lacks fails with status 1")
    func readMissing() async throws {
        try await radio.run {
            try await withServer { _ in
                let result = await able(["read", peripheralAddress, "2a19"])
                #expect(result.status == 1)
                #expect(result.errors.first?.contains("has no characteristic 00002a19") == true)
            }
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test(
        "What the library refuses is one line on standard error and status 1, never a trap",
        arguments: [
            (
                ["write", "5A:00:00:00:00:02", "\(text)", "--without-response", String(repeating: "ab", count: 300)],
                "do not fit a write without response"
            ),
            (["read", "5A:00:00:00:00:02", "\(counter)"], "Read not permitted"),
        ] as [([String], String)])
    func libraryRefusals(arguments: [String], message: String) async throws {
        try await radio.run {
            try await withServer { _ in
                let result = await able(arguments)
                #expect(result.status == 1, "\(result.errors)")
                #expect(result.errors.count == 1, "\(result.errors)")
                #expect(result.errors.first?.contains(message) == true, "\(result.errors)")
                #expect(result.errors.first?.contains("\n") == false)
            }
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test("notify --count N prints exactly N values, then unsubscribes and disconnects")
    func notify() async throws {
        try await radio.run {
            try await withServer { server in
                let result = await able(["notify", peripheralAddress, "\(Self.counter)", "--count", "2"])
                #expect(result.status == 0, "\(result.errors)")
                #expect(
                    result.json.map { $0.replacingOccurrences(of: "a5a50003-0000-1000-8000-00805f9b34fb", with: "C") }
                        == [
                            #"{"event":"notification","index":1,"characteristic":"C","value":{"hex":"01","text":null}}"#,
                            #"{"event":"notification","index":2,"characteristic":"C","value":{"hex":"02","text":null}}"#,
                            #"{"event":"end","count":2}"#,
                        ])
                #expect(await server.isSubscribed(CharacteristicID(Self.counter, service: Self.service)) == false)
            }
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test("serve stops by itself when --duration ends, and removes its advertisement")
    func serveForADuration() async throws {
        await radio.run {
            let result = await able(["serve", "--name", "brief", "--duration", "0.2"], on: peripheral)
            #expect(result.status == 0, "\(result.errors)")
            #expect(
                result.json == [
                    #"{"event":"serving","adapter":"sim-peripheral","name":"brief"}"#, #"{"event":"stopped"}"#,
                ])
            // Nothing advertises "brief" any more: the scan's timeout (on the radio's clock) ends it.
            await #expect(throws: BluetoothError.self) {
                try await central.scan(ScanFilter(namePrefix: "brief")).first(timeout: .seconds(5))
            }
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test("serve serves and advertises until cancelled (Ctrl-C), printing what centrals do")
    func serve() async throws {
        try await radio.run {
            let serving = Task(executorPreference: radio.clock.executor) {
                await able(["serve", "--name", "served", "--duration", "600"], on: peripheral)
            }
            let found: Discovery
            do {
                found = try await central.scan(ScanFilter(namePrefix: "served")).first(timeout: .seconds(5))
            } catch {
                let result = await serving.value
                Issue.record("able serve: \(result)")
                throw error
            }
            let level = try await central.withConnection(to: found) { peripheral in
                try await peripheral.read(CharacteristicID(.batteryLevel, service: .batteryService))
            }
            #expect(level.count == 1)
            serving.cancel()
            let result = await serving.value
            #expect(result.status == 130, "\(result.errors)")
            #expect(result.json.first == #"{"event":"serving","adapter":"sim-peripheral","name":"served"}"#)
            #expect(result.json.contains { $0.hasPrefix(#"{"event":"connected","central":"#) })
            #expect(result.json.contains { $0.hasPrefix(#"{"event":"read","characteristic":"00002a19-"#) })
            #expect(result.json.last == #"{"event":"stopped"}"#)
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test("l2cap listen echoes, l2cap connect sends and prints each echo")
    func l2cap() async throws {
        try await radio.run {
            let (console, output) = Console.capturing(json: true)
            let listening = Task(executorPreference: radio.clock.executor) {
                await AbleCommand.run(
                    ["l2cap", "listen", "--channels", "1", "--json"],
                    context: CommandContext(
                        console: console, adapter: { [peripheral] _ in peripheral }, simulatedPair: SimulatedPair.make))
            }
            let listeningLine = await output.firstLine { $0.hasPrefix(#"{"event":"listening","psm":"#) }
            let psm = try #require(listeningLine.split(separator: ":").last?.dropLast())
            let advertising = try await peripheral.startAdvertising(Advertisement(localName: "echo"))
            let result = await able([
                "l2cap", "connect", peripheralAddress, String(psm), "--count", "2", "--message", "ping",
            ])
            await advertising.stop()
            #expect(result.status == 0, "\(result.errors)")
            #expect(result.json.count == 3)
            #expect(
                result.json.dropFirst().allSatisfy {
                    $0.contains(#""value":{"hex":"70696e67","text":"ping"},"echoed":true"#)
                })
            #expect(await listening.value == 0)
            #expect(output.out.last == #"{"event":"closed","channel":1,"echoed":2}"#)
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test("demo runs the seed scenario on the simulated radio and leaves nothing open")
    func demo() async {
        // The demo makes a radio of its own and runs on that radio's executor.
        let result = await able(["demo", "--notifications", "2"])
        #expect(result.status == 0, "\(result.errors)")
        let events = result.json.compactMap { line in
            line.split(separator: #""event":""#).last.map { String($0.dropLast(2)) }
        }
        #expect(events.contains { $0.hasPrefix("service A: read PSM 0x00") }, "\(events)")
        #expect(events.contains("notification 2 of 2: 02"))
        #expect(events.filter { $0.hasPrefix("sent ") && $0.hasSuffix("bytes, got them echoed") }.count == 3)
        #expect(events.suffix(2) == ["nothing left open on the radio", "done"])
    }

    @Test(
        "serve --secure answers a central's pairing with its standing agent, or refuses it with --pairing refuse",
        arguments: [true, false])
    func serveAnswersPairing(accepting: Bool) async throws {
        try await radio.run {
            async let serving = able(
                ["serve", "--secure", "--duration", "20", "--interval", "60"]
                    + (accepting ? [] : ["--pairing", "refuse"]),
                on: peripheral)
            try await central.withPairingAgent(.justWorks) {
                let discovery = try await central.scan(ScanFilter(serviceUUIDs: [.batteryService]))
                    .first(timeout: .seconds(10))
                let device = central.peripheral(for: discovery)
                try await device.connect()
                let message = CharacteristicID(ServeCommand.messageCharacteristic, service: ServeCommand.messageService)
                if accepting {
                    let value = try await device.read(message)
                    #expect(value == Array("hello".utf8))
                } else {
                    let error = await #expect(throws: BluetoothError.self) { try await device.read(message) }
                    // The failed pairing drops the link, as on BlueZ.
                    #expect(error?.code == .disconnected)
                }
                #expect(await device.isPaired == accepting)
                try await device.disconnect()
            }
            let result = await serving
            #expect(result.status == 0, "\(result.errors)")
            let pairing = result.json.filter { $0.contains(#""event":"pairing""#) }
            #expect(pairing.count == 1, "\(result.json)")
            #expect(pairing.first?.contains(#""central":"\#(try #require(await central.state.address))""#) == true)
            #expect(pairing.first?.contains(#""accepted":\#(accepting)"#) == true, "\(pairing)")
            #expect(result.json.contains { $0.contains(#""event":"read""#) } == accepting, "\(result.json)")
            #expect(peripheral.pairingAgent == nil)
            #expect(radio.openResources.isEmpty)
        }
    }
}
