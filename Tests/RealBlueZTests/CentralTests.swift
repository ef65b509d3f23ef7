import Able
import AbleDBus
import Testing

extension RealBlueZ {
    /// `Peripheral` on hci0 against Able's own `GATTServer` on hci1.
    @Suite(.timeLimit(.minutes(2)))
    struct Central {
        @Test func servicesReadsWritesDescriptorsAndTheMTU() async throws {
            final class UUIDs: Sendable {
                let service = BluetoothUUID.random()
                let computed = BluetoothUUID.random()
                let stored = BluetoothUUID.random()
                let descriptor = BluetoothUUID.random()
            }
            let uuids = UUIDs()
            let readers = Recorder<Able.Central?>()
            let definition = GATTServerDefinition {
                Service(uuids.service) {
                    Characteristic(uuids.computed, properties: [.read])
                    Characteristic(uuids.stored, properties: [.read, .write, .writeWithoutResponse], value: [1, 2, 3]) {
                        Descriptor(uuids.descriptor, permissions: [.readable, .writable], value: [0x44])
                    }
                }
                OnRead(CharacteristicID(uuids.computed, service: uuids.service), answering: .immediately) { request in
                    readers.append(request.central)
                    return [0xCA, 0xFE]
                }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [uuids.service]) { server, peripheral in
                    #expect(await peripheral.isConnected)
                    #expect(await rig.bluezDevice("Connected", of: rig.peripheralOnCentral, as: Bool.self) == true)
                    let served = try #require(try await peripheral.services().first { $0.uuid == uuids.service })
                    #expect(served.isPrimary)
                    #expect(Set(served.characteristics.map(\.uuid)) == [uuids.computed, uuids.stored])
                    let storedID = CharacteristicID(uuids.stored, service: uuids.service)
                    let characteristic = try await peripheral.characteristic(storedID)
                    #expect(characteristic.properties.isSuperset(of: [.read, .write, .writeWithoutResponse]))
                    #expect(characteristic.descriptors.map(\.uuid).contains(uuids.descriptor))

                    // A read the handler answers, and who it says read.
                    let computed = try await peripheral.read(CharacteristicID(uuids.computed, service: uuids.service))
                    #expect(computed == [0xCA, 0xFE])
                    #expect(readers.all.count == 1)
                    #expect(readers.all.first??.address == rig.centralAddress)

                    // The stored value, a write with response, and one without.
                    #expect(try await peripheral.read(storedID) == [1, 2, 3])
                    try await peripheral.write([4, 5], to: storedID, type: .withResponse)
                    #expect(await server.value(of: CharacteristicID(uuids.stored, service: uuids.service)) == [4, 5])
                    #expect(try await peripheral.read(storedID) == [4, 5])
                    try await peripheral.write([6, 7, 8], to: storedID, type: .withoutResponse)
                    try await eventually("the write without response to reach the server") {
                        await server.value(of: CharacteristicID(uuids.stored, service: uuids.service)) == [6, 7, 8]
                    }
                    #expect(try await peripheral.read(storedID) == [6, 7, 8])

                    // A descriptor the server declared.
                    let descriptor = DescriptorID(uuids.descriptor, characteristic: storedID)
                    #expect(try await peripheral.read(descriptor) == [0x44])
                    try await peripheral.write([0x55, 0x66], to: descriptor)
                    #expect(try await peripheral.read(descriptor) == [0x55, 0x66])

                    // BlueZ exchanges the MTU when it connects (517 between two BlueZ).
                    let mtu = try #require(try await peripheral.mtu(of: storedID), "BlueZ reports no MTU")
                    #expect((23...517).contains(mtu), "MTU \(mtu)")
                }
            }
        }

        @Test func attErrorsFromTheServerArriveWithTheirCodes() async throws {
            final class UUIDs: Sendable {
                let service = BluetoothUUID.random()
                let failing = BluetoothUUID.random()
                let writeOnly = BluetoothUUID.random()
                let refused = BluetoothUUID.random()
            }
            let uuids = UUIDs()
            let definition = GATTServerDefinition {
                Service(uuids.service) {
                    Characteristic(uuids.failing, properties: [.read, .write])
                    Characteristic(uuids.writeOnly, properties: [.write])
                    Characteristic(uuids.refused, properties: [.read])
                }
                OnRead(CharacteristicID(uuids.failing, service: uuids.service), answering: .immediately) { _ in
                    throw ATTError.application(0x80)!
                }
                OnWrite(CharacteristicID(uuids.failing, service: uuids.service), answering: .immediately) { _ in
                    throw ATTError.application(0x9F)!
                }
                OnRead(CharacteristicID(uuids.refused, service: uuids.service), answering: .immediately) { _ in
                    throw ATTError.readNotPermitted
                }
            }
            try await withRig { rig in
                try await rig.withConnectedServer(definition, advertising: [uuids.service]) { _, peripheral in
                    // (Identifiers are made inside the closures: see BluetoothUUID.random().)
                    // Application errors: BlueZ says `Failed` "Operation failed with ATT error: 0x80".
                    let readError = await failure {
                        try await peripheral.read(CharacteristicID(uuids.failing, service: uuids.service))
                    }
                    let read = try #require(readError as? BluetoothError, "\(String(describing: readError))")
                    #expect(read.code == .attError, "\(read.debugDescription)")
                    #expect(read.attError == ATTError.application(0x80), "\(read.debugDescription)")
                    #expect(read.errorName == "org.bluez.Error.Failed", "\(read.debugDescription)")

                    let writeError = await failure {
                        try await peripheral.write([1], to: CharacteristicID(uuids.failing, service: uuids.service))
                    }
                    let write = try #require(writeError as? BluetoothError, "\(String(describing: writeError))")
                    #expect(write.code == .attError, "\(write.debugDescription)")
                    #expect(write.attError == ATTError.application(0x9F), "\(write.debugDescription)")

                    // Read Not Permitted, from BlueZ's own permission check and from a handler:
                    // BlueZ says `NotPermitted` "Read not permitted".
                    for which in [\UUIDs.writeOnly, \UUIDs.refused] {
                        let error = await failure {
                            try await peripheral.read(CharacteristicID(uuids[keyPath: which], service: uuids.service))
                        }
                        let notPermitted = try #require(error as? BluetoothError, "\(String(describing: error))")
                        #expect(notPermitted.code == .notPermitted, "\(notPermitted.debugDescription)")
                        #expect(notPermitted.attError == .readNotPermitted, "\(notPermitted.debugDescription)")
                        #expect(notPermitted.errorName == "org.bluez.Error.NotPermitted")
                    }
                    // The link survives errors.
                    #expect(await peripheral.isConnected)
                }
            }
        }

        @Test func aConnectThatTimesOutOrIsCancelledLeavesBlueZDisconnected() async throws {
            let service = [BluetoothUUID.random()]
            try await withRig { rig in
                // hci0 learns hci1's address; then hci1 stops advertising, so no connection can complete.
                let discovery = try await rig.discovering(service) { $0 }
                let peripheral = rig.central.peripheral(for: discovery)

                let timeout = await failure { try await peripheral.connect(timeout: .milliseconds(300)) }
                #expect((timeout as? BluetoothError)?.code == .timeout, "\(String(describing: timeout))")

                let attempt = Task { try await peripheral.connect(timeout: .seconds(30)) }
                try await Task.sleep(for: .milliseconds(500))
                attempt.cancel()
                let cancelled = try await withDeadline(.seconds(10), waitingFor: "the cancelled connect to return") {
                    await attempt.result
                }
                switch cancelled {
                case .success: Issue.record("a connect to a silent peripheral succeeded")
                case .failure(let error):
                    #expect(
                        error is CancellationError || (error as? BluetoothError)?.code == .cancelled,
                        "the cancelled connect threw \(error)")
                }

                // Were BlueZ still trying, it would connect as soon as hci1 advertises again.
                try await rig.advertising(service, name: "able") {
                    let stayedDisconnected = try await staysFalse(for: .seconds(4)) {
                        await rig.bluezDevice("Connected", of: rig.peripheralOnCentral, as: Bool.self) == true
                    }
                    #expect(stayedDisconnected, "BlueZ connected hci0 to hci1 after the connects were abandoned")
                }
                #expect(await !peripheral.isConnected)
                #expect(await rig.bluezDevice("Connected", of: rig.centralOnPeripheral, as: Bool.self) != true)
            }
        }

        @Test func pairingWithJustWorksPairsBothSides() async throws {
            let service = [BluetoothUUID.random()]
            let definition = GATTServerDefinition {
                Service(service[0]) { Characteristic(BluetoothUUID.random(), properties: [.read], value: [1]) }
            }
            try await withRig { rig in
                // hci1's side of the pairing asks the default agent about hci0, a device other than
                // the one being paired: hci1's standing agent answers it.
                try await rig.peripheral.withPairingAgent(.justWorks, asSystemDefault: true) {
                    try await rig.withConnectedServer(definition, advertising: service) { _, peripheral in
                        #expect(await !peripheral.isPaired)
                        try await peripheral.pair(with: .justWorks, timeout: .seconds(30))
                        try await eventually("Able to see hci1 paired") { await peripheral.isPaired }
                        #expect(await rig.bluezDevice("Paired", of: rig.peripheralOnCentral, as: Bool.self) == true)
                        #expect(await rig.bluezDevice("Paired", of: rig.centralOnPeripheral, as: Bool.self) == true)
                        #expect(await peripheral.isConnected)
                    }
                }
            }
        }
    }
}
