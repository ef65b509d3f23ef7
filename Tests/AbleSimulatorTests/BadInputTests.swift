import Able
import AbleScenarios
import AbleSimulator
import Testing

/// Every public entry point that takes user data refuses what cannot work with a typed error,
/// before the backend sees it. The scenario `badInputIsRefusedAtTheSurface` checks the same on
/// real BlueZ.
@Suite(.timeLimit(.minutes(1)))
struct BadInputTests {
    static let address: BluetoothAddress = "00:00:00:00:00:07"

    @Test(
        "A name no adapter can have is refused before BlueZ is asked",
        arguments: ["", "hci0/x", "hci 0", "../hci0", "hci-0", "hci0\u{0}", "hcï0", String(repeating: "h", count: 65)])
    func adapterNames(name: String) async {
        let error = await #expect(throws: BluetoothError.self) { try await Adapter.named(name) }
        #expect(error?.code == .invalidArguments)
    }

    /// One refusal: what the user asks, on an adapter of a simulated radio with a connected
    /// peripheral, and the code it is refused with.
    struct Refusal: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var code: BluetoothError.Code
        var attempt: @Sendable (_ adapter: Adapter, _ peripheral: Peripheral) async throws -> Void

        init(
            _ description: String, _ code: BluetoothError.Code,
            _ attempt: @escaping @Sendable (Adapter, Peripheral) async throws -> Void
        ) {
            testDescription = description
            self.code = code
            self.attempt = attempt
        }
    }

    static let oversize = [UInt8](repeating: 0xAB, count: 513)

    static let refusals: [Refusal] = [
        Refusal("an empty advertised name", .invalidArguments) { adapter, _ in
            _ = try await adapter.startAdvertising(Advertisement(localName: ""))
        },
        Refusal("an advertisement timeout of zero", .invalidArguments) { adapter, _ in
            _ = try await adapter.startAdvertising(Advertisement(localName: "t", timeout: .zero))
        },
        Refusal("a negative advertisement duration", .invalidArguments) { adapter, _ in
            _ = try await adapter.startAdvertising(Advertisement(duration: .seconds(-1)))
        },
        Refusal("advertising data over 31 bytes", .valueTooLong) { adapter, _ in
            _ = try await adapter.startAdvertising(
                Advertisement(manufacturerData: [0xFFFF: [UInt8](repeating: 0, count: 40)]))
        },
        Refusal("an adapter name over 248 bytes", .valueTooLong) { adapter, _ in
            try await adapter.setAlias(String(repeating: "é", count: 125))
        },
        Refusal("listening on a PSM over 0xFF", .invalidArguments) { adapter, _ in
            _ = try await adapter.listenL2CAP(psm: PSM(rawValue: 0x1001))
        },
        Refusal("listening with a receive MTU under 23", .invalidArguments) { adapter, _ in
            _ = try await adapter.listenL2CAP(receiveMTU: 22)
        },
        Refusal("listening with a receive MTU over 65,535", .invalidArguments) { adapter, _ in
            _ = try await adapter.listenL2CAP(receiveMTU: 65_536)
        },
        Refusal("opening a channel to PSM 0", .invalidArguments) { _, peripheral in
            _ = try await peripheral.openL2CAPChannel(psm: .automatic)
        },
        Refusal("opening a channel to a PSM over 0xFF", .invalidArguments) { _, peripheral in
            _ = try await peripheral.openL2CAPChannel(psm: PSM(rawValue: 0x0100))
        },
        Refusal("opening a channel with a negative timeout", .invalidArguments) { _, peripheral in
            _ = try await peripheral.openL2CAPChannel(psm: PSM(rawValue: 0x0080), timeout: .seconds(-1))
        },
        Refusal("connecting with a negative timeout", .invalidArguments) { _, peripheral in
            try await peripheral.connect(timeout: .milliseconds(-1))
        },
        Refusal("pairing with a negative timeout", .invalidArguments) { _, peripheral in
            try await peripheral.pair(timeout: .seconds(-5))
        },
        Refusal("reading at a negative offset", .invalidOffset) { _, peripheral in
            _ = try await peripheral.read(SeedCharacteristic.a1, offset: -1)
        },
        Refusal("reading at an offset past 511", .invalidOffset) { _, peripheral in
            _ = try await peripheral.read(SeedCharacteristic.a1, offset: 512)
        },
        Refusal("writing 513 bytes", .valueTooLong) { _, peripheral in
            try await peripheral.write(oversize, to: SeedCharacteristic.a1)
        },
        Refusal("writing without response past the MTU", .valueTooLong) { _, peripheral in
            try await peripheral.write(
                [UInt8](repeating: 1, count: 300), to: SeedCharacteristic.a1, type: .withoutResponse)
        },
        Refusal("a server definition with a service declared twice", .invalidArguments) { adapter, _ in
            let server = try await GATTServer.start(on: adapter) {
                Service(SeedService.b) { Characteristic(SeedCharacteristic.b1, properties: .read) }
                Service(SeedService.b) { Characteristic(SeedCharacteristic.b2, properties: .read) }
            }
            await server.close()
        },
        Refusal("a server definition with a characteristic declared twice", .invalidArguments) { adapter, _ in
            let server = try await GATTServer.start(on: adapter) {
                Service(SeedService.b) {
                    Characteristic(SeedCharacteristic.b1, properties: .read)
                    Characteristic(SeedCharacteristic.b1, properties: .write)
                }
            }
            await server.close()
        },
        Refusal("a server definition with a descriptor declared twice", .invalidArguments) { adapter, _ in
            let server = try await GATTServer.start(on: adapter) {
                Service(SeedService.b) {
                    Characteristic(SeedCharacteristic.b1, properties: .read) {
                        Descriptor(.characteristicUserDescription, value: Array("one".utf8))
                        Descriptor(.characteristicUserDescription, value: Array("two".utf8))
                    }
                }
            }
            await server.close()
        },
        Refusal("a server definition with a 513-byte descriptor", .invalidArguments) { adapter, _ in
            let server = try await GATTServer.start(on: adapter) {
                Service(SeedService.b) {
                    Characteristic(SeedCharacteristic.b1, properties: .read) {
                        Descriptor(.characteristicUserDescription, value: oversize)
                    }
                }
            }
            await server.close()
        },
        Refusal("a server value of 513 bytes", .valueTooLong) { adapter, _ in
            let server = try await GATTServer.start(on: adapter) {
                Service(SeedService.b) { Characteristic(SeedCharacteristic.b2, properties: [.read, .notify]) }
            }
            defer { Task { await server.close() } }
            try await server.setValue(oversize, of: SeedCharacteristic.b2)
        },
        Refusal("a notification of 513 bytes", .valueTooLong) { adapter, _ in
            let server = try await GATTServer.start(on: adapter) {
                Service(SeedService.b) { Characteristic(SeedCharacteristic.b2, properties: [.read, .notify]) }
            }
            do {
                try await server.notify(SeedCharacteristic.b2, value: oversize)
            } catch {
                await server.close()
                throw error
            }
            await server.close()
        },
    ]

    @Test("What cannot work is refused with a typed error and changes nothing", arguments: refusals)
    func refusal(_ refusal: Refusal) async throws {
        let radio = SimulatedRadio()
        try await radio.run {
            radio.addPeripheral(address: Self.address, advertisement: Advertisement(localName: "seed")) {
                Service(SeedService.a) {
                    Characteristic(
                        SeedCharacteristic.a1, properties: [.read, .write, .writeWithoutResponse], value: [0x41])
                }
            }
            let adapter = radio.makeAdapter()
            let peripheral = adapter.peripheral(address: Self.address)
            try await peripheral.connect()
            let error = await #expect(throws: BluetoothError.self) { try await refusal.attempt(adapter, peripheral) }
            #expect(error?.code == refusal.code, "\(String(describing: error))")
            #expect(error?.message.isEmpty == false)
            // Nothing was written, and the link still works.
            #expect(try await peripheral.read(SeedCharacteristic.a1) == [0x41])
            try await peripheral.disconnect()
            #expect(radio.openResources.isEmpty)
        }
    }

    @Test("A server handler's error that is not an ATT error reaches the central as Unlikely Error")
    func handlerErrors() async throws {
        struct NotAnATTError: Error {}
        let radio = SimulatedRadio()
        try await radio.run {
            let serverAdapter = radio.makeAdapter(name: "hci1")
            let central = radio.makeAdapter(name: "hci0")
            let server = try await GATTServer.start(on: serverAdapter) {
                Service(SeedService.a) { Characteristic(SeedCharacteristic.a1, properties: [.read, .write]) }
                OnRead(SeedCharacteristic.a1, answering: .immediately) { _ in throw NotAnATTError() }
                OnWrite(SeedCharacteristic.a1, answering: .immediately) { _ in throw CancellationError() }
            }
            let peripheral = central.peripheral(address: try #require(await serverAdapter.state.address))
            try await peripheral.connect()
            let read = await #expect(throws: BluetoothError.self) { try await peripheral.read(SeedCharacteristic.a1) }
            #expect(read?.attError == .unlikelyError)
            let write = await #expect(throws: BluetoothError.self) {
                try await peripheral.write([1], to: SeedCharacteristic.a1)
            }
            #expect(write?.attError == .unlikelyError)
            try await peripheral.disconnect()
            await server.close()
            #expect(radio.openResources.isEmpty)
        }
    }
}
