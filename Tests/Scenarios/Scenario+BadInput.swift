import AbleCore
import Testing

/// A server handler's error that is not an ``ATTError``.
private struct NotAnATTError: Error {}

extension Scenario {
    /// What cannot work is refused at the public surface with a typed error, before BlueZ (or
    /// the simulator) sees it, and a server handler's error that is not an ``ATTError`` reaches
    /// the central as ATT's Unlikely Error, not as a crash or a hang.
    static func badInputIsRefusedAtTheSurface(_ backend: some ScenarioBackend) async throws {
        func expectRefusal(
            _ code: BluetoothError.Code, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
            _ body: () async throws -> Void
        ) async {
            do {
                try await body()
                Issue.record("\(what) was accepted", sourceLocation: sourceLocation)
            } catch let error as BluetoothError {
                #expect(error.code == code, "\(what): \(error)", sourceLocation: sourceLocation)
            } catch {
                Issue.record(error, "\(what) was refused with an error that is not a BluetoothError")
            }
        }
        let server = backend.peripheral
        await expectRefusal(.invalidArguments, "an empty advertised name") {
            _ = try await server.startAdvertising(Advertisement(localName: ""))
        }
        await expectRefusal(.valueTooLong, "advertising data over 31 bytes") {
            _ = try await server.startAdvertising(
                Advertisement(manufacturerData: [0xFFFF: [UInt8](repeating: 0, count: 40)]))
        }
        await expectRefusal(.valueTooLong, "an adapter name over 248 bytes") {
            try await server.setAlias(String(repeating: "a", count: 249))
        }
        await expectRefusal(.invalidArguments, "a PSM outside the LE ranges") {
            _ = try await server.listenL2CAP(psm: PSM(rawValue: 0x0100))
        }
        await expectRefusal(.invalidArguments, "a receive MTU under 23") {
            _ = try await server.listenL2CAP(receiveMTU: 22)
        }
        await expectRefusal(.invalidArguments, "a descriptor declared twice") {
            let service = BluetoothUUID.random()
            let characteristic = BluetoothUUID.random()
            let descriptor = BluetoothUUID.random()
            let server = try await GATTServer.start(on: server) {
                Service(service) {
                    Characteristic(characteristic, properties: .read) {
                        Descriptor(descriptor, permissions: .readable, value: [1])
                        Descriptor(descriptor, permissions: .readable, value: [2])
                    }
                }
            }
            await server.close()
        }

        let service = BluetoothUUID.random()
        let failing = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(failing.uuid, properties: [.read, .write], value: [1]) }
            OnRead(failing, answering: .immediately) { _ in throw NotAnATTError() }
        }
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            let error = await #expect(throws: BluetoothError.self) { try await peripheral.read(failing) }
            #expect(error?.attError == .unlikelyError, "\(String(describing: error))")
            await expectRefusal(.invalidOffset, "a negative read offset") {
                _ = try await peripheral.read(failing, offset: -1)
            }
            await expectRefusal(.invalidOffset, "a read offset past 511") {
                _ = try await peripheral.read(failing, offset: 512)
            }
            await expectRefusal(.valueTooLong, "a write of 513 bytes") {
                try await peripheral.write([UInt8](repeating: 7, count: 513), to: failing)
            }
            await expectRefusal(.invalidArguments, "the automatic PSM as a peer's") {
                _ = try await peripheral.openL2CAPChannel(psm: .automatic)
            }
            await expectRefusal(.invalidArguments, "a negative connection timeout") {
                try await peripheral.connect(timeout: .seconds(-1))
            }
            await expectRefusal(.valueTooLong, "a server value of 513 bytes") {
                try await server.setValue([UInt8](repeating: 7, count: 513), of: failing)
            }
            // The refusals left the link and the server as they were.
            #expect(await server.value(of: failing) == [1])
            let again = await #expect(throws: BluetoothError.self) { try await peripheral.read(failing) }
            #expect(again?.attError == .unlikelyError)
        }
    }
}
