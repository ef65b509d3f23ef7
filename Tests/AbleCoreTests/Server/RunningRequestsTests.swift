import AbleIO
import AbleTestSupport
import Testing

@testable import AbleCore

/// Abandoning a central's requests, both ways a handler can run: in the request's own task with
/// a backend's early answer (BlueZ), and in a task of its own (the simulator).
@Suite(.timeLimit(.minutes(1)))
struct RunningRequestsTests {
    /// The write fails with ``ATTError/unlikelyError`` at once, the handler is cancelled, and the
    /// `.store` it returns afterwards stores nothing.
    @Test(arguments: [true, false])
    func anAbandonedWriteStoresNothing(answeredByTheBackend: Bool) async throws {
        let service: BluetoothUUID = "12E61727-B41A-436F-B64D-4777B35F2294"
        let uuid: BluetoothUUID = "ABDD3056-28FA-441D-A470-55A75A525504"
        let events = Locked<[String]>([])
        let core = GATTServerCore(
            definition: GATTServerDefinition {
                Service(service) { Characteristic(uuid, properties: [.read, .write], value: [1]) }
                OnWrite(CharacteristicID(uuid, service: service)) { _ in
                    events.value.append("started")
                    while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
                    events.value.append("cancelled")
                    return .store
                }
            })
        let id = try #require(core.characteristics(uuid).first)
        let central = Central(address: "11:22:33:44:55:66")
        // The backend's answer: here it only cancels the request's task, as BlueZ's does.
        let request = Lock<Task<Void, any Error>?>(nil)
        let abandonment =
            answeredByTheBackend
            ? RequestAbandonment {
                events.value.append("answered by the backend")
                request.withLock { $0 }?.cancel()
            } : nil
        let write = Task {
            try await core.write(
                id, value: [7], offset: 0, kind: .request, central: central, mtu: nil, abandonment: abandonment)
        }
        request.withLock { $0 = write }
        try await waitUntil { events.value == ["started"] }
        core.abandonRequests(of: central)
        let error = await #expect(throws: ATTError.self) { try await write.value }
        #expect(error == .unlikelyError)
        try await waitUntil { events.value.contains("cancelled") }
        #expect(events.value.contains("answered by the backend") == answeredByTheBackend)
        #expect(core.storedValue(id) == [1])
    }
}
