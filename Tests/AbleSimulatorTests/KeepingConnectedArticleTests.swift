import Able
import AbleSimulator
import Testing

/// The test that the article "Keeping a device connected" shows (an excerpt of this file, checked
/// by Scripts/doccode), run as written: a maintained connection's subscription reports the link
/// drop with its reason and is enabled again after the reconnection.
@Suite(.timeLimit(.minutes(1)))
struct KeepingConnectedArticleTests {
    @Test func theReadingsResumeAfterTheLinkDrops() async throws {
        let radio = SimulatedRadio()
        let sensor = radio.addPeripheral(
            address: "C0:FF:EE:00:00:01", advertisement: Advertisement(localName: "HRM", serviceUUIDs: [.heartRate])
        ) {
            Service(.heartRate) { Characteristic(.heartRateMeasurement, properties: .notify) }
        }
        let measurement = CharacteristicID(.heartRateMeasurement, service: .heartRate)
        try await radio.run {
            let adapter = radio.makeAdapter()
            try await adapter.withMaintainedConnection(to: sensor.address) { connection in
                var events = connection.notifications(of: measurement).makeAsyncIterator()
                #expect(try await events.next() == .enabled)
                sensor.notify(measurement, value: [0, 60])
                #expect(try await events.next() == .value([0, 60]))
                sensor.disconnectAll(reason: .linkTimeout)
                guard case .interrupted(let reason) = try await events.next() else {
                    Issue.record("no gap reported")
                    return
                }
                #expect(reason.code == .linkTimeout)
                #expect(try await events.next() == .enabled)  // reconnected and subscribed again
            }
        }
        #expect(radio.openResources.isEmpty)
    }
}
