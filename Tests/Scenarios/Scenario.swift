import AbleCore
public import Testing

/// The scenarios every backend must pass alike: written once, run on the simulated radio in
/// every `swift test` and on real BlueZ in the QEMU guest.
public enum Scenario: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case scanningWithFilters
    case connectingAndDiscovering
    case readingAndWriting
    case exactlyNNotifications
    case serverHandlersAndATTErrors
    case aServerDisconnectingACentralAnswersItsPendingRequests
    case subscriptionAndConnectionEvents
    case l2capEcho
    case seed002
    case badInputIsRefusedAtTheSurface
    case writeWithoutResponseThroughTheSocket
    case aServerTakesWriteCommandsFromItsCentral
    case writesWithoutResponseDoNotWaitForAReadInProgress
    case notificationsThroughTheSocket
    case notificationsOneAtATimeThroughTheSocket
    case notificationsThroughAHandler
    case longAndReliableWrites
    case aServerNotifyingInATightLoopKeepsAnswering
    case notifyingOneCentral
    case indicatingEveryCentralOrOne
    case connectionEventsAreAboutTheServersCentrals
    case immediateAndSuspendingHandlersAnswerAlike
    case handlersAreChosenByWhatTheyName
    case aServerKeepsItsValuesWithinWhatTheCentralReceives

    public var testDescription: String { rawValue }

    /// Runs the scenario on `backend`, then the backend's tear-down.
    public func run(on backend: some ScenarioBackend) async throws {
        try await withCleanup {
            switch self {
            case .scanningWithFilters: try await Self.scanningWithFilters(backend)
            case .connectingAndDiscovering: try await Self.connectingAndDiscovering(backend)
            case .readingAndWriting: try await Self.readingAndWriting(backend)
            case .exactlyNNotifications: try await Self.exactlyNNotifications(backend)
            case .serverHandlersAndATTErrors: try await Self.serverHandlersAndATTErrors(backend)
            case .aServerDisconnectingACentralAnswersItsPendingRequests:
                try await Self.aServerDisconnectingACentralAnswersItsPendingRequests(backend)
            case .subscriptionAndConnectionEvents: try await Self.subscriptionAndConnectionEvents(backend)
            case .l2capEcho: try await Self.l2capEcho(backend)
            case .seed002: try await Self.seed002(backend)
            case .badInputIsRefusedAtTheSurface: try await Self.badInputIsRefusedAtTheSurface(backend)
            case .writeWithoutResponseThroughTheSocket: try await Self.writeWithoutResponseThroughTheSocket(backend)
            case .aServerTakesWriteCommandsFromItsCentral:
                try await Self.aServerTakesWriteCommandsFromItsCentral(backend)
            case .writesWithoutResponseDoNotWaitForAReadInProgress:
                try await Self.writesWithoutResponseDoNotWaitForAReadInProgress(backend)
            case .notificationsThroughTheSocket: try await Self.notificationsThroughTheSocket(backend)
            case .notificationsOneAtATimeThroughTheSocket:
                try await Self.notificationsOneAtATimeThroughTheSocket(backend)
            case .notificationsThroughAHandler: try await Self.notificationsThroughAHandler(backend)
            case .longAndReliableWrites: try await Self.longAndReliableWrites(backend)
            case .aServerNotifyingInATightLoopKeepsAnswering:
                try await Self.aServerNotifyingInATightLoopKeepsAnswering(backend)
            case .notifyingOneCentral: try await Self.notifyingOneCentral(backend)
            case .indicatingEveryCentralOrOne: try await Self.indicatingEveryCentralOrOne(backend)
            case .connectionEventsAreAboutTheServersCentrals:
                try await Self.connectionEventsAreAboutTheServersCentrals(backend)
            case .immediateAndSuspendingHandlersAnswerAlike:
                try await Self.immediateAndSuspendingHandlersAnswerAlike(backend)
            case .handlersAreChosenByWhatTheyName: try await Self.handlersAreChosenByWhatTheyName(backend)
            case .aServerKeepsItsValuesWithinWhatTheCentralReceives:
                try await Self.aServerKeepsItsValuesWithinWhatTheCentralReceives(backend)
            }
        } cleanup: {
            do {
                try await backend.tearDown()
            } catch {
                Issue.record(error, "tearing down after \(self)")
            }
        }
    }

    // MARK: The scenarios

    static func scanningWithFilters(_ backend: some ScenarioBackend) async throws {
        let advertised = BluetoothUUID.random()
        let other = BluetoothUUID.random()
        let peripheralAddress = try #require(await backend.peripheral.state.address)
        // Scans start before advertising: the emulated controllers report an advertisement once.
        let byService = try await backend.central.scan(ScanFilter(serviceUUIDs: [advertised]))
        let byName = try await backend.central.scan(ScanFilter(namePrefix: "scn"))
        let byOtherService = try await backend.central.scan(ScanFilter(serviceUUIDs: [other]))
        let advertising = try await backend.peripheral.startAdvertising(
            Advertisement(localName: "scn1", serviceUUIDs: [advertised]))
        try await withCleanup {
            let found = try await byService.first(timeout: backend.discoveryTimeout)
            #expect(found.address == peripheralAddress)
            #expect(found.advertisement.serviceUUIDs.contains(advertised))
            #expect(found.name == "scn1")
            let named = try await byName.first(timeout: backend.discoveryTimeout)
            #expect(named.address == peripheralAddress)
            let nothing = await #expect(throws: BluetoothError.self) {
                try await byOtherService.first(timeout: .seconds(3))
            }
            #expect(nothing?.code == .timeout)
        } cleanup: {
            await advertising.stop()
        }
    }

    static func connectingAndDiscovering(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let readable = CharacteristicID(.random(), service: service)
        let notifying = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(readable.uuid, properties: [.read, .write], value: [1]) {
                    Descriptor(.characteristicUserDescription, value: Array("level".utf8))
                }
                Characteristic(notifying.uuid, properties: [.notify])
            }
        }
        try await withConnection(backend, serving: definition, advertising: service) { _, peripheral in
            #expect(await peripheral.isConnected)
            let services = try await peripheral.services()
            let discovered = try #require(services.first { $0.uuid == service })
            #expect(discovered.isPrimary)
            #expect(Set(discovered.characteristics.map(\.uuid)) == [readable.uuid, notifying.uuid])
            let first = try await peripheral.characteristic(readable)
            #expect(first.properties.isSuperset(of: [.read, .write]))
            #expect(first.descriptors.map(\.uuid) == [.characteristicUserDescription])
            let description = DescriptorID(.characteristicUserDescription, characteristic: readable)
            #expect(try await peripheral.read(description) == Array("level".utf8))
            let second = try await peripheral.characteristic(notifying)
            #expect(second.properties.contains(.notify))
            // The Client Characteristic Configuration descriptor comes with notifying.
            #expect(second.descriptors.map(\.uuid) == [.clientCharacteristicConfiguration])
        }
    }

    static func readingAndWriting(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let value = CharacteristicID(.random(), service: service)
        let command = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(value.uuid, properties: [.read, .write], value: [1, 2, 3])
                Characteristic(command.uuid, properties: [.read, .writeWithoutResponse], value: [0])
            }
        }
        try await withConnection(backend, serving: definition, advertising: service) { _, peripheral in
            #expect(try await peripheral.read(value) == [1, 2, 3])
            try await peripheral.write([9, 8, 7, 6], to: value)
            #expect(try await peripheral.read(value) == [9, 8, 7, 6])
            #expect(try await peripheral.read(value, offset: 2) == [7, 6])
            try await peripheral.write([0x42], to: command, type: .withoutResponse)
            try await backend.eventually("the write without response to land") {
                try await peripheral.read(command) == [0x42]
            }
            let tooLong = await #expect(throws: BluetoothError.self) {
                try await peripheral.write(Array(repeating: 0, count: 513), to: value)
            }
            #expect(tooLong?.code == .valueTooLong)
        }
    }

    static func exactlyNNotifications(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let counter = CharacteristicID(.random(), service: service)
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(counter.uuid, properties: [.read, .notify], value: [0]) }
        }
        let count = 5
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            let stream = try await peripheral.notifications(of: counter)
            try await backend.eventually("the server to see the subscription") {
                await server.isSubscribed(counter)
            }
            for value in 1...(count + 2) { try await server.notify(counter, value: [UInt8(value)]) }
            var received: [[UInt8]] = []
            for try await value in stream.prefix(count) { received.append(value) }
            #expect(received == (1...count).map { [UInt8($0)] })
            try await backend.eventually("the subscription to stop") { await !server.isSubscribed(counter) }
            #expect(await peripheral.isConnected)
        }
    }

    static func serverHandlersAndATTErrors(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let computed = CharacteristicID(.random(), service: service)
        let guarded = CharacteristicID(.random(), service: service)
        let writeOnly = CharacteristicID(.random(), service: service)
        let reads = Recorder<Int>()
        let definition = GATTServerDefinition {
            Service(service) {
                Characteristic(computed.uuid, properties: [.read])
                Characteristic(guarded.uuid, properties: [.read, .write], value: [0])
                Characteristic(writeOnly.uuid, properties: [.write])
            }
            OnRead(computed, answering: .immediately) { request in
                reads.append(request.offset)
                return [0xC0, 0xFF, 0xEE]
            }
            OnWrite(guarded, answering: .immediately) { request in
                guard request.value.first != 0xFF else { throw ATTError(rawValue: 0x80) }
                return .store
            }
        }
        try await withConnection(backend, serving: definition, advertising: service) { _, peripheral in
            #expect(try await peripheral.read(computed) == [0xC0, 0xFF, 0xEE])
            #expect(reads.all == [0])
            try await peripheral.write([0x01], to: guarded)
            #expect(try await peripheral.read(guarded) == [0x01])
            let refused = await #expect(throws: BluetoothError.self) { try await peripheral.write([0xFF], to: guarded) }
            #expect(refused?.attError == ATTError(rawValue: 0x80))
            #expect(refused?.code == .attError)
            #expect(try await peripheral.read(guarded) == [0x01])
            let notReadable = await #expect(throws: BluetoothError.self) { try await peripheral.read(writeOnly) }
            #expect(notReadable?.code == .notPermitted)
            #expect(notReadable?.attError == .readNotPermitted)
            #expect(notReadable?.message == "Read not permitted")
        }
    }

    /// A server that disconnects a central while a handler of the central's read is still working
    /// answers the read at once (BlueZ must never answer it through the freed channel), cancels the
    /// handler and drops what it returns; the central's read fails as the disconnect it is, without
    /// waiting for the handler.
    static func aServerDisconnectingACentralAnswersItsPendingRequests(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let slow = CharacteristicID(.random(), service: service)
        let readers = Recorder<Central?>()
        let handlerEnds = Recorder<Bool>()
        let departures = Recorder<String?>()
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(slow.uuid, properties: [.read]) }
            OnConnectionStateChange { _, change in
                if !change.isConnected { departures.append(change.reason) }
            }
            OnRead(slow) { request in
                readers.append(request.central)
                // Far longer than the test may wait: only the cancellation ends it early.
                try? await backend.pause(.seconds(120))
                handlerEnds.append(Task.isCancelled)
                return [1]
            }
        }
        let centralAddress = try #require(await backend.central.state.address)
        try await withConnection(backend, serving: definition, advertising: service) { server, peripheral in
            async let outcome: Result<[UInt8], any Error> = {
                do { return .success(try await peripheral.read(slow)) } catch { return .failure(error) }
            }()
            try await backend.eventually("the server's handler to start reading") { !readers.all.isEmpty }
            let central = try #require(readers.all.first ?? nil, "the server was not told who reads")
            #expect(central.address == centralAddress)
            try await server.disconnect(central)
            switch await outcome {
            case .success(let value): Issue.record("the read returned \(value) after the server disconnected")
            case .failure(let error):
                let error = try #require(error as? BluetoothError, "the read threw \(error)")
                #expect(error.code == .disconnected, "the read threw \(error.debugDescription)")
            }
            try await backend.eventually("the handler to be cancelled") { handlerEnds.all == [true] }
            try await backend.eventually("the central to see the link drop") { await !peripheral.isConnected }
            try await backend.eventually("the server to see the central go") { await server.connectedCentrals.isEmpty }
            try await backend.eventually("the server's disconnection event") { !departures.all.isEmpty }
            // BlueZ before 5.83 does not say why a link ended.
            #expect(departures.all == [backend.reportsDisconnectionReasons ? "this adapter ended the link" : nil])
        }
    }

    static func subscriptionAndConnectionEvents(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let level = CharacteristicID(.random(), service: service)
        let subscriptions = Recorder<String>()
        let connections = Recorder<Bool>()
        let reasons = Recorder<String?>()
        let centralAddress = try #require(await backend.central.state.address)
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(level.uuid, properties: [.read, .notify], value: [50]) }
            OnSubscriptionChange { _, central, uuid, isSubscribed in
                // BlueZ before 5.69 does not say which central subscribed.
                subscriptions.append("\(central.map { "\($0.address)" } ?? "?") \(uuid == level.uuid) \(isSubscribed)")
            }
            OnConnectionStateChange { _, change in
                guard change.central.address == centralAddress else { return }
                connections.append(change.isConnected)
                reasons.append(change.reason)
            }
        }
        try await withServer(backend, definition) { server in
            try await withDiscovery(backend, advertising: service) { discovery in
                let peripheral = backend.central.peripheral(for: discovery)
                try await peripheral.connect(timeout: backend.connectTimeout)
                try await backend.eventually("the server to see the connection") { connections.all == [true] }
                #expect(await server.connectedCentrals.map(\.address) == [centralAddress])
                let stream = try await peripheral.notifications(of: level)
                let who = backend.namesSubscribers ? "\(centralAddress)" : "?"
                try await backend.eventually("the subscription event") { subscriptions.all == ["\(who) true true"] }
                #expect(
                    await server.subscribers(of: level).map(\.address)
                        == (backend.namesSubscribers ? [centralAddress] : []))
                try await server.notify(level, value: [51])
                for try await value in stream.prefix(1) { #expect(value == [51]) }
                try await backend.eventually("the unsubscription event") {
                    subscriptions.all == ["\(who) true true", "\(who) true false"]
                }
                #expect(await server.subscribers(of: level) == [])
                try await peripheral.disconnect()
                try await backend.eventually("the server to see the disconnection") {
                    connections.all == [true, false]
                }
                // BlueZ before 5.83 does not say why a link ended.
                #expect(reasons.all == [nil, backend.reportsDisconnectionReasons ? "the central ended the link" : nil])
            }
        }
    }

    static func l2capEcho(_ backend: some ScenarioBackend) async throws {
        let service = BluetoothUUID.random()
        let psmCharacteristic = CharacteristicID(.random(), service: service)
        let listener = try await backend.peripheral.listenL2CAP()
        let definition = GATTServerDefinition {
            Service(service) { Characteristic(psmCharacteristic.uuid, properties: [.read], value: listener.psm.bytes) }
        }
        // How each served channel ended: the central closing its end ends the stream.
        let echo = Task {
            var endings: [String] = []
            for try await channel in listener.channels {
                do {
                    for try await packet in channel.packets { try await channel.send(packet) }
                    endings.append("end")
                } catch let error as BluetoothError {
                    endings.append("\(error.code)")
                }
                await channel.close()
            }
            return endings
        }
        try await withCleanup {
            try await withConnection(backend, serving: definition, advertising: service) { _, peripheral in
                let psm = try #require(PSM(bytes: try await peripheral.read(psmCharacteristic)))
                #expect(psm == listener.psm)
                let channel = try await peripheral.openL2CAPChannel(psm: psm, timeout: backend.connectTimeout)
                try await withCleanup {
                    var packets = channel.packets.makeAsyncIterator()
                    for size in [1, 23, 100, min(channel.sendMTU, 600)] {
                        let packet = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
                        try await channel.send(packet)
                        #expect(try await packets.next() == packet)
                    }
                    // A batch, as a stream of small SDUs goes: each echoed whole, in order.
                    let batch = (0..<64).map { index in
                        [UInt8(index), UInt8(index &* 3)] + [UInt8](repeating: 0xA5, count: index % 40)
                    }
                    try await channel.send(contentsOf: batch)
                    for packet in batch { #expect(try await packets.next() == packet) }
                } cleanup: {
                    await channel.close()
                }
            }
        } cleanup: {
            await listener.close()
        }
        let endings = try await echo.value
        #expect(endings == ["end"])
    }

    /// Seed 002: read A1 (service A), read B1 (service B), take B1[0] notifications of B2.
    static func seed002(_ backend: some ScenarioBackend) async throws {
        let serviceA = BluetoothUUID.random()
        let serviceB = BluetoothUUID.random()
        let a1 = CharacteristicID(.random(), service: serviceA)
        let b1 = CharacteristicID(.random(), service: serviceB)
        let b2 = CharacteristicID(.random(), service: serviceB)
        let definition = GATTServerDefinition {
            Service(serviceA) { Characteristic(a1.uuid, properties: [.read], value: [0x41]) }
            Service(serviceB) {
                Characteristic(b1.uuid, properties: [.read], value: [3])
                Characteristic(b2.uuid, properties: [.notify])
            }
        }
        try await withConnection(backend, serving: definition, advertising: serviceA) { server, peripheral in
            let a1Value = try await peripheral.read(a1)
            let count = Int(try await peripheral.read(b1)[0])
            let stream = try await peripheral.notifications(of: b2)
            try await backend.eventually("the server to see the subscription") { await server.isSubscribed(b2) }
            for value in 10..<16 { try await server.notify(b2, value: [UInt8(value)]) }
            var values: [[UInt8]] = []
            for try await value in stream.prefix(count) { values.append(value) }
            #expect(a1Value == [0x41])
            #expect(values == [[10], [11], [12]])
        }
    }

    // MARK: Steps

    static func withServer<T>(
        _ backend: some ScenarioBackend, _ definition: GATTServerDefinition, pacing: NotificationPacing = .default,
        _ body: (GATTServer) async throws -> T
    ) async throws -> T {
        let server = try await GATTServer.start(on: backend.peripheral, pacing: pacing, definition: definition)
        return try await withCleanup {
            try await body(server)
        } cleanup: {
            await server.close()
        }
    }

    /// Scans for `service`, advertises it on the peripheral adapter, and runs `body` with the discovery.
    static func withDiscovery<T>(
        _ backend: some ScenarioBackend, advertising service: BluetoothUUID, _ body: (Discovery) async throws -> T
    ) async throws -> T {
        let scan = try await backend.central.scan(ScanFilter(serviceUUIDs: [service]))
        let advertising = try await backend.peripheral.startAdvertising(
            Advertisement(localName: "able", serviceUUIDs: [service]))
        return try await withCleanup {
            let discovery = try await scan.first(timeout: backend.discoveryTimeout)
            #expect(discovery.address == (await backend.peripheral.state.address))
            return try await body(discovery)
        } cleanup: {
            await advertising.stop()
        }
    }

    /// Serves `definition`, finds it, connects, and runs `body`; then undoes it all.
    static func withConnection<T>(
        _ backend: some ScenarioBackend, serving definition: GATTServerDefinition, advertising service: BluetoothUUID,
        pacing: NotificationPacing = .default, _ body: (GATTServer, Peripheral) async throws -> T
    ) async throws -> T {
        try await withServer(backend, definition, pacing: pacing) { server in
            try await withDiscovery(backend, advertising: service) { discovery in
                let peripheral = backend.central.peripheral(for: discovery)
                try await peripheral.connect(timeout: backend.connectTimeout)
                return try await withCleanup {
                    try await body(server, peripheral)
                } cleanup: {
                    try? await peripheral.disconnect()
                }
            }
        }
    }
}
