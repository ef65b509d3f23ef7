import Able
import AbleDBus
import AbleTestSupport
// For SOCK_SEQPACKET and SOCK_CLOEXEC: which Clang module owns <sys/socket.h>'s constants depends
// on the build's module cache, and in `Scripts/check`'s build it was CBluetooth, not Glibc.
import CBluetooth
import Foundation

@testable import AbleBlueZ

/// A remote device in a ``FakeBlueZ``: `Device1` with `Connect` and `Disconnect`, and once
/// connected, GATT services whose characteristics read, write and notify like BlueZ's.
final class FakeDevice: Sendable {
    struct Characteristic: Sendable {
        var uuid: String
        var flags: [String]
        var value: [UInt8]
        var descriptors: [String] = []
    }

    struct Service: Sendable {
        var uuid: String
        var characteristics: [Characteristic]
    }

    let path: DBusObjectPath
    let connection: DBusConnection
    let services: [Service]
    /// Whether `Connect` announces `Connected = true` (BlueZ 5.66 often does not).
    let announcesConnected: Bool
    let state = Locked<[String: DBusValue]>([:])
    let values = Locked<[DBusObjectPath: [UInt8]]>([:])
    let calls = Locked<[String]>([])
    /// Makes `Connect` fail with this BlueZ error name and message.
    let connectFailure = Locked<(String, String)?>(nil)
    /// Makes `Connect` never finish resolving services.
    let neverResolves = Locked(false)
    /// Makes characteristic reads fail with this BlueZ error name and message, and, when
    /// `thenDisconnect` is set, drops the link 100 ms later, as BlueZ fails a read the link
    /// drop interrupted before it announces the disconnect.
    let readFailure = Locked<(name: String, message: String, thenDisconnect: Bool)?>(nil)
    /// Makes characteristic reads go unanswered while set, as BlueZ 5.82 leaves a request whose
    /// link dropped during the pairing it started; `readsWaiting` counts the reads held so.
    let readHangs = Locked(false)
    let readsWaiting = Locked(0)
    /// Makes `StartNotify` answer only this long after it is called (it counts as called at once).
    let startNotifyDelay = Locked<Duration>(.zero)
    /// Makes `Connect` answer only once this is cleared (it counts as called at once).
    let connectHangs = Locked(false)
    /// Makes `Connect` answer (with `Connected` set) and the fake then leave the bus, as a
    /// `bluetoothd` that crashes right after answering does.
    let leavesTheBusAfterConnect = Locked(false)
    /// Makes `StartNotify` remove its characteristic (`InterfacesRemoved`) before it answers.
    let removesCharacteristicOnStartNotify = Locked(false)
    /// Makes `ReadValue` remove its characteristic (`InterfacesRemoved`) and answer
    /// `UnknownObject`, as the bus does for a call that reaches an object BlueZ just removed.
    let removesCharacteristicOnRead = Locked(false)
    /// How `AcquireWrite` and `AcquireNotify` answer: `nil` grants a socket, otherwise the BlueZ
    /// error name and message. By default they refuse as a BlueZ without them would.
    let acquireAnswer = Locked<(name: String, message: String)?>(
        ("org.freedesktop.DBus.Error.UnknownMethod", "no such method"))
    /// The acquisitions asked for, as `AcquireWrite:char0011`.
    let acquisitions = Locked<[String]>([])
    /// BlueZ's ends of the sockets handed out, by acquisition.
    let socketEnds = Locked<[String: Int32]>([:])

    init(
        path: DBusObjectPath, connection: DBusConnection, services: [Service], announcesConnected: Bool,
        agent: Locked<(owner: String, path: DBusObjectPath)?>
    ) {
        self.agent = agent
        self.path = path
        self.connection = connection
        self.services = services
        self.announcesConnected = announcesConnected
    }

    /// Named as BlueZ names them, after handles: services 0x0010 apart, characteristics 3 apart.
    func servicePath(_ service: Int) -> DBusObjectPath {
        DBusObjectPath(rawValue: path.rawValue + "/service" + hex(0x10 * (service + 1)))!
    }

    func characteristicPath(_ service: Int, _ characteristic: Int) -> DBusObjectPath {
        DBusObjectPath(
            rawValue: servicePath(service).rawValue + "/char" + hex(0x10 * (service + 1) + 1 + 3 * characteristic))!
    }

    func export(address: String) async throws {
        state.value = [
            "Address": .string(address), "AddressType": .string("public"), "Name": .string("fake-device"),
            "Connected": .boolean(false), "ServicesResolved": .boolean(false), "RSSI": .int16(-40),
            "UUIDs": .array(.string, services.map { .string($0.uuid) }), "Paired": .boolean(false),
        ]
        let state = self.state
        let properties = state.value.keys.sorted().map { key in
            DBusProperty(key, signature: state.value[key]!.signature, get: { state.value[key]! })
        }
        try await connection.export(
            [
                DBusInterface(
                    "org.bluez.Device1",
                    methods: [
                        DBusMethod("Connect") { [weak self] _ in
                            try await self?.connect(); return []
                        },
                        DBusMethod("Disconnect") { [weak self] _ in
                            await self?.disconnect(); return []
                        },
                        DBusMethod("Pair") { [weak self] _ in
                            try await self?.pair(); return []
                        },
                        DBusMethod("CancelPairing") { [weak self] _ in
                            self?.calls.value.append("CancelPairing"); return []
                        },
                    ], properties: properties)
            ], at: path)
    }

    private func set(_ name: String, _ value: DBusValue, announce: Bool = true) {
        state.value[name] = value
        if announce {
            connection.emitPropertiesChanged(path: path, interface: "org.bluez.Device1", changed: [name: value])
        }
    }

    /// Where BlueZ's registered pairing agent is.
    let agent: Locked<(owner: String, path: DBusObjectPath)?>

    /// The BlueZ side of pairing: asks the registered agent to confirm passkey 123456.
    private func pair() async throws {
        calls.value.append("Pair")
        guard let (owner, agentPath) = agent.value else {
            throw DBusError("org.bluez.Error.AuthenticationFailed", "no agent")
        }
        do {
            _ = try await connection.call(
                destination: owner, path: agentPath, interface: "org.bluez.Agent1", method: "RequestConfirmation",
                arguments: [.objectPath(path), .uint32(123_456)])
        } catch let error as DBusError where error.name.rawValue == "org.bluez.Error.Rejected" {
            throw DBusError("org.bluez.Error.AuthenticationRejected", "Authentication Rejected")
        }
        set("Paired", .boolean(true))
    }

    private func connect() async throws {
        calls.value.append("Connect")
        while connectHangs.value { try await Task.sleep(for: .milliseconds(20)) }
        if let (name, message) = connectFailure.value { throw DBusError(DBusError.Name(rawValue: name), message) }
        set("Connected", .boolean(true), announce: announcesConnected)
        if leavesTheBusAfterConnect.value {
            // After the answer has gone out: the handler's return sends it.
            Task { [connection] in
                try? await Task.sleep(for: .milliseconds(1))
                await connection.close()
            }
            return
        }
        guard !neverResolves.value else { return }
        for (serviceIndex, service) in services.enumerated() {
            let servicePath = servicePath(serviceIndex)
            try await connection.export(
                [
                    DBusInterface(
                        "org.bluez.GattService1",
                        properties: [
                            .constant("UUID", service.uuid), .constant("Primary", true), .constant("Device", path),
                        ])
                ], at: servicePath)
            for (index, characteristic) in service.characteristics.enumerated() {
                try await exportCharacteristic(
                    characteristic, at: characteristicPath(serviceIndex, index), service: servicePath)
            }
        }
        set("ServicesResolved", .boolean(true))
    }

    private func exportCharacteristic(
        _ characteristic: Characteristic, at path: DBusObjectPath, service: DBusObjectPath
    )
        async throws
    {
        values.value[path] = characteristic.value
        let values = self.values
        let calls = self.calls
        let device = self
        try await connection.export(
            [
                DBusInterface(
                    "org.bluez.GattCharacteristic1",
                    methods: [
                        DBusMethod("ReadValue", in: "a{sv}", out: "ay") { _ in
                            guard device.state.value["Connected"] == .boolean(true) else {
                                throw DBusError("org.bluez.Error.Failed", "Not connected")
                            }
                            if device.removesCharacteristicOnRead.value {
                                await device.connection.unexport(path)
                                throw DBusError(.unknownObject, "No such object path '\(path.rawValue)'")
                            }
                            if device.readHangs.value {
                                device.readsWaiting.withLock { $0 += 1 }
                                while device.readHangs.value { try await Task.sleep(for: .milliseconds(20)) }
                            }
                            if let failure = device.readFailure.value {
                                if failure.thenDisconnect {
                                    Task {
                                        try? await Task.sleep(for: .milliseconds(100))
                                        await device.disconnect()
                                    }
                                }
                                throw DBusError(DBusError.Name(rawValue: failure.name), failure.message)
                            }
                            return [.bytes(values.value[path] ?? [])]
                        },
                        DBusMethod("WriteValue", in: "aya{sv}") { call in
                            let options = try call.argument(1, as: [String: DBusVariant].self)
                            calls.value.append("WriteValue:\(try options.decode("type", as: String.self) ?? "request")")
                            values.value[path] = try call.argument(0)
                            return []
                        },
                        DBusMethod("StartNotify") { _ in
                            calls.value.append("StartNotify:\(path.lastElement)")
                            if device.removesCharacteristicOnStartNotify.value {
                                await device.connection.unexport(path)
                            }
                            try await Task.sleep(for: device.startNotifyDelay.value)
                            return []
                        },
                        DBusMethod("StopNotify") { _ in
                            calls.value.append("StopNotify:\(path.lastElement)"); return []
                        },
                        DBusMethod("AcquireWrite", in: "a{sv}", out: "hq") { _ in
                            try device.acquire("AcquireWrite:\(path.lastElement)")
                        },
                        DBusMethod("AcquireNotify", in: "a{sv}", out: "hq") { _ in
                            try device.acquire("AcquireNotify:\(path.lastElement)")
                        },
                    ],
                    properties: [
                        .constant("UUID", characteristic.uuid), .constant("Service", service),
                        .constant("Flags", characteristic.flags), .constant("MTU", UInt16(23)),
                    ])
            ], at: path)
        for (index, uuid) in characteristic.descriptors.enumerated() {
            let descriptorPath = DBusObjectPath(rawValue: path.rawValue + "/desc" + hex(handle(of: path) + 1 + index))!
            values.value[descriptorPath] = [0, 0]
            try await connection.export(
                [
                    DBusInterface(
                        "org.bluez.GattDescriptor1",
                        methods: [
                            DBusMethod("ReadValue", in: "a{sv}", out: "ay") { _ in
                                [.bytes(values.value[descriptorPath] ?? [])]
                            },
                            DBusMethod("WriteValue", in: "aya{sv}") { call in
                                values.value[descriptorPath] = try call.argument(0)
                                return []
                            },
                        ], properties: [.constant("UUID", uuid), .constant("Characteristic", path)])
                ], at: descriptorPath)
        }
    }

    func disconnect() async {
        calls.value.append("Disconnect")
        for (serviceIndex, service) in services.enumerated() {
            for index in service.characteristics.indices {
                let characteristic = characteristicPath(serviceIndex, index)
                for descriptor in service.characteristics[index].descriptors.indices {
                    await connection.unexport(
                        DBusObjectPath(
                            rawValue: characteristic.rawValue + "/desc"
                                + hex(handle(of: characteristic) + 1 + descriptor))!)
                }
                await connection.unexport(characteristic)
            }
            await connection.unexport(servicePath(serviceIndex))
        }
        set("ServicesResolved", .boolean(false))
        set("Connected", .boolean(false))
    }

    /// Answers an acquisition: a refusal, or one end of a fresh `AF_UNIX` `SOCK_SEQPACKET`
    /// socketpair and an MTU of 23, keeping the other end, as BlueZ does.
    private func acquire(_ what: String) throws -> [DBusValue] {
        acquisitions.value.append(what)
        if let (name, message) = acquireAnswer.value { throw DBusError(DBusError.Name(rawValue: name), message) }
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw DBusError("org.bluez.Error.Failed", "socketpair failed")
        }
        socketEnds.value[what] = fds[0]
        return [.unixFD(DBusFileDescriptor(owning: fds[1])), .uint16(23)]
    }

    /// Sends a notification of a characteristic, as BlueZ relays one.
    func notify(_ service: Int, _ characteristic: Int, _ value: [UInt8]) {
        connection.emitPropertiesChanged(
            path: characteristicPath(service, characteristic), interface: "org.bluez.GattCharacteristic1",
            changed: ["Value": .bytes(value)])
    }
}

extension FakeBlueZ {
    /// Adds a device that can be connected to, below `adapter`.
    func addConnectableDevice(
        _ address: String, on adapter: String = "hci0", services: [FakeDevice.Service], announcesConnected: Bool = false
    ) async throws -> FakeDevice {
        let device = FakeDevice(
            path: devicePath(address, on: adapter), connection: connection, services: services,
            announcesConnected: announcesConnected, agent: agent)
        try await device.export(address: address)
        return device
    }
}

private func hex(_ handle: Int) -> String {
    let digits = String(handle, radix: 16)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}

/// The handle a BlueZ object path ends in (`…/char0011` → 0x11).
private func handle(of path: DBusObjectPath) -> Int {
    Int(path.rawValue.suffix(4), radix: 16) ?? 0
}
