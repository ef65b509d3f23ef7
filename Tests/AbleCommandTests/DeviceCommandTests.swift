import Able
import AbleSimulator
import Testing

@testable import AbleCommand

/// `able devices`, `able pair` and `able forget` on the simulated radio, with `--json`.
@Suite("able's device commands on the simulated radio", .timeLimit(.minutes(1)))
struct DeviceCommandTests {
    let commands = SimulatedCommandTests()

    @Test("pair bonds, devices lists the bond, forget removes it and then fails")
    func pairDevicesForget() async throws {
        let address = commands.peripheralAddress
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
