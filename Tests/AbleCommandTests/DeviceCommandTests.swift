import Able
import AbleIO
import AbleSimulator
import AbleTestSupport
import Testing

@testable import AbleCommand

/// `able devices`, `able pair` and `able forget` on the simulated radio, with `--json`.
@Suite("able's device commands on the simulated radio", .timeLimit(.minutes(1)))
struct DeviceCommandTests {
    let commands = SimulatedCommandTests()

    @Test("pair bonds, devices lists the bond, forget removes it and then fails")
    func pairDevicesForget() async throws {
        let address = commands.peripheralAddress
        // The server's side of the pairing is answered by its adapter's standing agent.
        try await commands.peripheral.setPairingAgent(.justWorks, asSystemDefault: true)
        try await commands.withServer { _ in
            let empty = await commands.able(["devices"])
            #expect(empty.status == 0, "\(empty.errors)")
            #expect(empty.json == [#"{"event":"end","count":0}"#])

            let paired = await commands.able(["pair", address, "--trust"])
            #expect(paired.status == 0, "\(paired.errors)")
            #expect(
                paired.json == [#"{"event":"paired","address":"\#(address)","bonded":true,"trusted":true}"#])

            let listed = await commands.able(["devices"])
            #expect(listed.status == 0, "\(listed.errors)")
            #expect(
                listed.json == [
                    #"{"event":"device","address":"\#(address)","addressType":"public","name":"sim-thing","#
                        + #""paired":true,"bonded":true,"trusted":true,"blocked":false,"connected":false}"#,
                    #"{"event":"end","count":1}"#,
                ])

            let forgotten = await commands.able(["forget", address])
            #expect(forgotten.status == 0, "\(forgotten.errors)")
            #expect(forgotten.json == [#"{"event":"forgotten","address":"\#(address)"}"#])
            #expect(await commands.able(["devices"]).json == [#"{"event":"end","count":0}"#])

            let again = await commands.able(["forget", address])
            #expect(again.status == 1)
            #expect(again.errors.joined().contains("not known"), "\(again.errors)")
        }
        #expect(commands.radio.openResources.isEmpty)
    }
}

/// `able notify --reconnect` on the simulated radio: a link loss in the middle of the values.
@Suite("able notify --reconnect on the simulated radio", .timeLimit(.minutes(1)))
struct NotifyReconnectCommandTests {
    static let service: BluetoothUUID = "A5A50001-0000-1000-8000-00805F9B34FB"
    static let counter: BluetoothUUID = "A5A50003-0000-1000-8000-00805F9B34FB"

    @Test("notify --reconnect subscribes again after a link loss, prints the gap and counts on")
    func notifyReconnect() async throws {
        let commands = SimulatedCommandTests()
        let radio = commands.radio
        let peripheralAddress = BluetoothAddress(commands.peripheralAddress)!
        let subscriptions = LockedCounter()
        // On the radio's executor, where the maintained connection's supervisor runs too, so
        // that the clock sees all of its work, however slow the machine (or ThreadSanitizer).
        let result = try await radio.run {
            // Each subscription gets three values; the link drops after the first three.
            let server = try await GATTServer.start(on: commands.peripheral) {
                Service(Self.service) { Characteristic(Self.counter, properties: .notify) }
                OnSubscriptionChange { server, _, _, isSubscribed in
                    guard isSubscribed else { return }
                    let round = subscriptions.increment()
                    for index in 1...3 {
                        try? await server.notify(
                            CharacteristicID(Self.counter, service: Self.service), value: [UInt8(round * 10 + index)])
                    }
                    if round == 1 { radio.peripheral(peripheralAddress).disconnectAll(reason: .peerDisconnected) }
                }
            }
            let advertising = try await commands.peripheral.startAdvertising(
                Advertisement(localName: "sim-thing", serviceUUIDs: [Self.service]))
            let result = await commands.able([
                "notify", commands.peripheralAddress, "\(Self.counter)", "--reconnect", "--count", "6",
            ])
            await advertising.stop()
            await server.close()
            return result
        }
        #expect(result.status == 0, "\(result.errors)")
        let events = result.json.compactMap { line in
            ["enabled", "notification", "interrupted", "end"].first { line.contains(#""event":"\#($0)""#) }
        }
        #expect(
            events == [
                "enabled", "notification", "notification", "notification", "interrupted", "enabled", "notification",
                "notification", "notification", "end",
            ])
        let values = result.json.filter { $0.contains(#""event":"notification""#) }.compactMap {
            $0.split(separator: #""value":{"hex":""#).last?.prefix(2)
        }
        #expect(values == ["0b", "0c", "0d", "15", "16", "17"], "each value exactly once, in order")
        #expect(result.json.last == #"{"event":"end","count":6}"#)
        #expect(radio.openResources.isEmpty)
    }
}

/// A counter shared with a server's handlers.
final class LockedCounter: Sendable {
    private let count = Lock(0)
    func increment() -> Int {
        count.withLock {
            $0 += 1
            return $0
        }
    }
}
