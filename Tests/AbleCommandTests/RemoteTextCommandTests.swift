import Able
import AbleSimulator
import Testing

@testable import AbleCommand

/// `able` facing a peripheral that advertises a name and serves a value made of terminal escape
/// sequences: the text output shows them escaped, the JSON output JSON-escaped, and neither holds
/// a raw control or bidirectional character.
@Suite("Text that a remote device chose, printed by able", .timeLimit(.minutes(1)))
struct RemoteTextCommandTests {
    /// Sets the terminal's title, clears the screen, reverses what follows, and ends with a
    /// backslash and a line break (which the console's last line of defence would leave).
    static let name = "\u{1B}]0;pwned\u{07}\u{1B}[2J\u{202E}x\\\n"
    static let escapedName = #""\x1b]0;pwned\x07\x1b[2J\u{202e}x\\\x0a""#
    static let jsonName = #""name":"\u001b]0;pwned\u0007\u001b[2J\u202ex\\\n""#

    static let value = Array("ok\u{1B}[2J\u{1B}]0;pwned\u{07}\u{202E}\\\n".utf8)
    static let escapedValue = #""ok\x1b[2J\x1b]0;pwned\x07\u{202e}\\\x0a""#
    static let jsonValue = #""text":"ok\u001b[2J\u001b]0;pwned\u0007\u202e\\\n""#

    let commands = SimulatedCommandTests()

    /// Advertises ``name`` from the peripheral adapter and serves ``value`` in the text
    /// characteristic, for `body`.
    func withHostilePeripheral(_ body: () async throws -> Void) async throws {
        let server = try await GATTServer.start(on: commands.peripheral) {
            Service(SimulatedCommandTests.service) {
                Characteristic(SimulatedCommandTests.text, properties: .read, value: Self.value)
            }
        }
        let advertising = try await commands.peripheral.startAdvertising(Advertisement(localName: Self.name))
        do {
            try await body()
        } catch {
            await advertising.stop()
            await server.close()
            throw error
        }
        await advertising.stop()
        await server.close()
    }

    /// Checks that no line holds a character a terminal acts on: C0 or C1 controls, DEL, or a
    /// bidirectional embedding, override or isolate.
    func expectInert(_ lines: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        for line in lines {
            let raw = line.unicodeScalars.filter {
                $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value)
                    || (0x2066...0x2069).contains($0.value)
            }
            #expect(
                raw.isEmpty, "raw \(raw.map { String($0.value, radix: 16) }) in \(line)", sourceLocation: sourceLocation
            )
        }
    }

    @Test("scan shows the advertised name escaped", arguments: [false, true])
    func scan(json: Bool) async throws {
        try await commands.radio.run {
            try await withHostilePeripheral {
                let result = await commands.able(["scan", "--count", "1", "--timeout", "5"], json: json)
                #expect(result.status == 0, "\(result.errors)")
                let line = try #require(result.json.first)
                #expect(line.contains(json ? Self.jsonName : Self.escapedName), "\(line)")
                expectInert(result.json + result.errors)
            }
            #expect(commands.radio.openResources.isEmpty)
        }
    }

    @Test("read shows the value as escaped text", arguments: [false, true])
    func read(json: Bool) async throws {
        try await commands.radio.run {
            try await withHostilePeripheral {
                let result = await commands.able(
                    ["read", commands.peripheralAddress, "\(SimulatedCommandTests.text)"], json: json)
                #expect(result.status == 0, "\(result.errors)")
                #expect(
                    result.json == [
                        json
                            ? #"{"event":"value","address":"5A:00:00:00:00:02","characteristic":"a5a50002-0000-1000-8000-00805f9b34fb","value":{"hex":""#
                                + Self.value.hex + "\"," + Self.jsonValue + "}}"
                            : Self.value.hex + " " + Self.escapedValue
                    ])
                expectInert(result.json + result.errors)
            }
            #expect(commands.radio.openResources.isEmpty)
        }
    }

    @Test("info --read shows the value escaped, and devices the name", arguments: [false, true])
    func infoAndDevices(json: Bool) async throws {
        try await commands.radio.run {
            try await withHostilePeripheral {
                let info = await commands.able(["info", commands.peripheralAddress, "--read"], json: json)
                #expect(info.status == 0, "\(info.errors)")
                #expect(info.json.contains { $0.contains(json ? Self.jsonValue : Self.escapedValue) }, "\(info.json)")
                expectInert(info.json + info.errors)

                let devices = await commands.able(["devices"], json: json)
                #expect(devices.status == 0, "\(devices.errors)")
                let device = try #require(devices.json.first)
                #expect(
                    device.contains(json ? Self.jsonName : " " + Self.escapedName.dropFirst().dropLast()), "\(device)")
                expectInert(devices.json + devices.errors)
            }
            #expect(commands.radio.openResources.isEmpty)
        }
    }
}
