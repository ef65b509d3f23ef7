import AbleCore
import AbleDBus
import AbleIO

/// A remote device as BlueZ exports it: an `org.bluez.Device1` object below its adapter.
struct BlueZPeripheralBackend: PeripheralBackend {
    static let device = "org.bluez.Device1"
    static let service = "org.bluez.GattService1"
    static let characteristic = "org.bluez.GattCharacteristic1"
    static let descriptor = "org.bluez.GattDescriptor1"

    let system: BlueZSystem
    let path: DBusObjectPath
    let address: BluetoothAddress
    /// The address type the device must have, when a scan reported it.
    let addressType: BluetoothAddress.AddressType?

    init(
        system: BlueZSystem, adapter: DBusObjectPath, address: BluetoothAddress,
        addressType: BluetoothAddress.AddressType? = nil
    ) {
        self.system = system
        self.address = address
        self.addressType = addressType
        self.path = adapter.appending(address.bluezPathComponent)!
    }

    private var properties: [String: DBusVariant]? { system.tree.properties(of: Self.device, at: path) }

    private func flag(_ name: String) -> Bool { (try? properties?.decode(name, as: Bool.self)) == true }

    var isConnected: Bool { flag("Connected") }

    // MARK: Connecting

    func connect(timeout: Duration) async throws {
        let start = ContinuousClock.now
        // An address BlueZ does not know is looked for first, within the same timeout.
        if properties == nil { try await discover(timeout: timeout) }
        let timeout = timeout - (ContinuousClock.now - start)
        let changes = system.tree.changes()
        let wasOutgoing = system.noteOutgoingLink(path)
        let alreadyConnected = isConnected && !wasOutgoing
        do {
            try await withDeadline(timeout, what: "connecting to \(address)") { [self] in
                _ = try await system.call(path, Self.device, "Connect", timeout: timeout)
                // BlueZ 5.66 often omits the PropertiesChanged for Connected: read it again.
                try await system.tree.refresh(Self.device, at: path)
                try await waitForServicesResolved(changes)
            }
        } catch {
            system.forgetOutgoingLink(path)
            // Stop BlueZ from trying (or drop a half-made link), even from a cancelled task.
            await system.callEvenIfCancelled(path, Self.device, "Disconnect")
            throw error
        }
        if alreadyConnected {
            // The device had connected to this adapter first: the link is the device's, and a
            // server here keeps counting it.
            system.forgetOutgoingLink(path)
        }
    }

    private func waitForServicesResolved(_ changes: AsyncStream<ObjectTreeChange>) async throws {
        var iterator = changes.makeAsyncIterator()
        while true {
            guard let properties else {
                if let adapter = path.parent,
                    let absence = system.tree.adapterAbsence(
                        adapter, "adapter \(adapter.lastElement) went away while connecting to \(address)")
                {
                    throw absence
                }
                throw BluetoothError(.disconnected, message: "\(address) went away while connecting")
            }
            if (try? properties.decode("ServicesResolved", as: Bool.self)) == true { return }
            if (try? properties.decode("Connected", as: Bool.self)) != true {
                throw BluetoothError(
                    .disconnected, message: "\(address) disconnected before its services were resolved")
            }
            guard await iterator.next() != nil else { throw CancellationError() }
        }
    }

    func disconnect() async throws {
        guard properties != nil else { return }
        // Stop what ended just before (StopNotify) ahead of the link, and let BlueZ send what
        // the write sockets hold.
        await system.notifications.drain()
        await releaseSockets()
        do {
            _ = try await system.call(path, Self.device, "Disconnect")
        } catch let error as BluetoothError where error.code == .notConnected {
            return
        }
    }

    var isPaired: Bool { flag("Paired") }

    func pair(with agent: PairingAgent, timeout: Duration) async throws {
        let system = self.system
        let path = self.path
        try await system.agents.withPairing(agent, device: path, system: system) {
            do {
                try await withDeadline(timeout, what: "pairing with \(address)") {
                    _ = try await system.call(path, Self.device, "Pair", timeout: timeout)
                }
            } catch {
                if error is CancellationError || (error as? BluetoothError)?.code == .timeout {
                    await system.callEvenIfCancelled(path, Self.device, "CancelPairing")
                }
                throw error
            }
        }
    }

    func connectionStates() -> AsyncStream<Peripheral.ConnectionState> {
        system.tree.states(of: path, bufferingPolicy: .unbounded) { [self] in
            guard properties != nil else {
                return .disconnected(reason: BluetoothError(.disconnected, message: "the device is gone"))
            }
            guard isConnected else {
                // BlueZ 5.83 and later say why a link ended; earlier versions do not.
                let reason = system.tree.disconnection(of: path).map {
                    BlueZDisconnectionReason.error($0.reason, message: $0.message, peer: "the peripheral")
                }
                return .disconnected(reason: reason)
            }
            return flag("ServicesResolved") ? .connected : .connecting
        }
    }

    // MARK: GATT

    func services() throws -> [RemoteService] {
        guard isConnected else { throw BluetoothError(.notConnected, message: "\(address) is not connected") }
        return system.tree.gattDatabase(of: path) { Self.gattDatabase(of: path, in: $0) }
    }

    /// The GATT database of the device at `device`, built from BlueZ's objects in one pass: each
    /// attribute's object names its parent's (a service its `Device`, a characteristic its
    /// `Service`, a descriptor its `Characteristic`). Each level comes in the order of the
    /// objects' paths, which BlueZ names after the attributes' handles.
    static func gattDatabase(
        of device: DBusObjectPath, in objects: [DBusObjectPath: BlueZObjectTree.Interfaces]
    ) -> [RemoteService] {
        typealias Object = (path: DBusObjectPath, properties: [String: DBusVariant])
        var services: [Object] = []
        var characteristics: [DBusObjectPath: [Object]] = [:]
        var descriptors: [DBusObjectPath: [Object]] = [:]
        func parent(_ properties: [String: DBusVariant], _ link: String) -> DBusObjectPath? {
            try? properties.decode(link, as: DBusObjectPath.self)
        }
        for (object, interfaces) in objects {
            if let properties = interfaces[service], parent(properties, "Device") == device {
                services.append((object, properties))
            }
            if let properties = interfaces[characteristic], let service = parent(properties, "Service") {
                characteristics[service, default: []].append((object, properties))
            }
            if let properties = interfaces[descriptor], let characteristic = parent(properties, "Characteristic") {
                descriptors[characteristic, default: []].append((object, properties))
            }
        }
        func sorted(_ objects: [Object]?) -> [Object] { (objects ?? []).sorted { $0.path < $1.path } }
        func id(_ object: DBusObjectPath) -> RemoteAttributeID {
            // Only an object BlueZ named otherwise lacks one; its operations then say it is gone.
            RemoteAttributeID(path: object, device: device) ?? RemoteAttributeID([])
        }
        func uuid(_ properties: [String: DBusVariant]) -> BluetoothUUID? {
            (try? properties.decode("UUID", as: String.self)).flatMap(BluetoothUUID.init)
        }
        return sorted(services).compactMap { service in
            guard let serviceUUID = uuid(service.properties) else { return nil }
            let characteristics = sorted(characteristics[service.path]).compactMap {
                characteristic -> RemoteCharacteristic? in
                guard let characteristicUUID = uuid(characteristic.properties) else { return nil }
                let descriptors = sorted(descriptors[characteristic.path]).compactMap { descriptor in
                    uuid(descriptor.properties).map {
                        RemoteDescriptor(uuid: $0, characteristicUUID: characteristicUUID, id: id(descriptor.path))
                    }
                }
                let flags = (try? characteristic.properties.decode("Flags", as: [String].self)) ?? []
                return RemoteCharacteristic(
                    uuid: characteristicUUID, serviceUUID: serviceUUID,
                    properties: CharacteristicProperties(bluezFlags: flags), descriptors: descriptors,
                    id: id(characteristic.path))
            }
            return RemoteService(
                uuid: serviceUUID, isPrimary: (try? service.properties.decode("Primary", as: Bool.self)) ?? true,
                characteristics: characteristics, id: id(service.path))
        }
    }

    /// The object of a discovered attribute; `gone` is the error when BlueZ no longer has it.
    func objectPath(_ id: RemoteAttributeID, gone: () -> BluetoothError) throws -> DBusObjectPath {
        guard let path = id.path(device: path), system.tree.interfaces(at: path) != nil else {
            guard isConnected else { throw BluetoothError(.notConnected, message: "\(address) is not connected") }
            throw gone()
        }
        return path
    }

    func objectPath(_ characteristic: RemoteCharacteristic) throws -> DBusObjectPath {
        let object = try objectPath(characteristic.id) { characteristic.removedError(of: address) }
        // After a change, the handle may name another characteristic.
        guard uuid(of: object, Self.characteristic) == characteristic.uuid else {
            throw characteristic.removedError(of: address)
        }
        return object
    }

    func objectPath(_ descriptor: RemoteDescriptor) throws -> DBusObjectPath {
        let object = try objectPath(descriptor.id) { descriptor.removedError(of: address) }
        guard uuid(of: object, Self.descriptor) == descriptor.uuid else { throw descriptor.removedError(of: address) }
        return object
    }

    private func uuid(of object: DBusObjectPath, _ interface: String) -> BluetoothUUID? {
        (try? system.tree.properties(of: interface, at: object)?.decode("UUID", as: String.self))
            .flatMap { $0 }.flatMap(BluetoothUUID.init)
    }

    /// Runs a call on an attribute's object, reporting the object vanishing under it (BlueZ
    /// answers `org.freedesktop.DBus.Error.UnknownObject` once the services changed) as `gone`.
    private func onAttribute<T: Sendable>(
        _ object: DBusObjectPath, gone: () -> BluetoothError, _ body: () async throws -> T
    ) async throws -> T {
        do {
            return try await body()
        } catch let error as BluetoothError
            where (error.cause as? DBusError).map({ $0.name == .unknownObject || $0.name == .unknownMethod }) == true
        {
            guard system.tree.interfaces(at: object) == nil else { throw error }
            guard isConnected else {
                throw BluetoothError(.notConnected, message: "\(address) is not connected", cause: error)
            }
            let removed = gone()
            throw BluetoothError(removed.code, message: removed.message, cause: error)
        }
    }

    func read(_ characteristic: RemoteCharacteristic, offset: Int) async throws -> [UInt8] {
        let path = try objectPath(characteristic)
        let reply = try await onAttribute(path, gone: { characteristic.removedError(of: address) }) {
            try await request("read of \(characteristic.uuid)") { interruption in
                try await system.call(
                    path, Self.characteristic, "ReadValue", [Self.options(offset: offset)], interruption: interruption)
            }
        }
        return try reply.first.unwrapped("ReadValue").decode([UInt8].self)
    }

    func write(_ value: [UInt8], to characteristic: RemoteCharacteristic, type: WriteType, offset: Int) async throws {
        let path = try objectPath(characteristic)
        let bluezType =
            switch type {
            case .withResponse: "request"
            case .withoutResponse: "command"
            case .reliable: "reliable"
            }
        let options = Self.options(offset: offset, type: bluezType)
        _ = try await onAttribute(path, gone: { characteristic.removedError(of: address) }) {
            try await request("write of \(characteristic.uuid)") { interruption in
                try await system.call(
                    path, Self.characteristic, "WriteValue", [.bytes(value), options], interruption: interruption)
            }
        }
    }

    func read(_ descriptor: RemoteDescriptor) async throws -> [UInt8] {
        let path = try objectPath(descriptor)
        let reply = try await onAttribute(path, gone: { descriptor.removedError(of: address) }) {
            try await request("read of descriptor \(descriptor.uuid)") { interruption in
                try await system.call(path, Self.descriptor, "ReadValue", [Self.options()], interruption: interruption)
            }
        }
        return try reply.first.unwrapped("ReadValue").decode([UInt8].self)
    }

    func write(_ value: [UInt8], to descriptor: RemoteDescriptor) async throws {
        let path = try objectPath(descriptor)
        _ = try await onAttribute(path, gone: { descriptor.removedError(of: address) }) {
            try await request("write of descriptor \(descriptor.uuid)") { interruption in
                try await system.call(
                    path, Self.descriptor, "WriteValue", [.bytes(value), Self.options()], interruption: interruption)
            }
        }
    }

    /// How long a request BlueZ has not answered may wait after BlueZ announces the link down.
    static let unansweredGrace = Duration.seconds(2)

    /// Runs a GATT request, reporting a failure caused by the link dropping as
    /// ``BluetoothError/Code/disconnected``.
    ///
    /// BlueZ fails a request the link drop interrupted with ATT's Unlikely Error
    /// (`Failed: Operation failed with ATT error: 0x0e`), or `NotConnected`, often before it
    /// announces `Connected = false`: such a failure means a disconnect when the device is, or
    /// becomes within ``linkLossGrace``, disconnected. The original error is the cause.
    ///
    /// `what` is made only when the link dropped: it names the attribute's UUID, whose text costs
    /// more to make than the rest of a request's work on Able's side.
    private func request<T: Sendable>(
        _ what: @autoclosure () -> String, _ body: (DBusCallInterruption) async throws -> T
    ) async throws -> T {
        do {
            return try await answered(body)
        } catch let error as BluetoothError where error.attError == .unlikelyError || error.code == .notConnected {
            guard await becomesDisconnected(within: Self.linkLossGrace) else { throw error }
            throw BluetoothError(
                .disconnected, message: "\(address) disconnected during the \(what())", cause: error,
                errorName: error.errorName, attError: error.attError)
        }
    }

    /// Runs `body`, a GATT request, until BlueZ answers it, or until ``unansweredGrace`` after BlueZ
    /// announces the link down without answering, which fails it as ``BluetoothError/Code/notConnected``.
    ///
    /// BlueZ 5.82 never answers a request whose link drops while the request waits for the pairing
    /// it started: a server's Insufficient Encryption or Authentication makes the ATT layer raise
    /// the link's security and retry the request (`handle_error_rsp` in `src/shared/att.c`), and
    /// when that pairing fails the kernel drops the link and the retry goes without a reply (seen
    /// in the guest with a peer whose agent refuses; 5.66 answers Unlikely Error). Without this the
    /// caller would wait for the D-Bus timeout.
    ///
    /// The request is listed with its device in the system's ``BlueZLinkLoss``, whose one listener
    /// of the object tree fails it through `body`'s ``DBusCallInterruption``: while the link is up a
    /// request costs that listing and nothing else (no task and no listener of its own). Only a
    /// link-down BlueZ announces after the request started counts: BlueZ 5.66 may never have
    /// announced the link up.
    private func answered<T: Sendable>(_ body: (DBusCallInterruption) async throws -> T) async throws -> T {
        let interruption = DBusCallInterruption()
        let id = system.linkLoss.add(interruption, device: path)
        defer { system.linkLoss.remove(id) }
        return try await body(interruption)
    }

    /// Whether the device is disconnected now, or is within `grace`.
    private func becomesDisconnected(within grace: Duration) async -> Bool {
        // Listen first, so a change between the check and the wait is not missed.
        let changes = system.tree.changes()
        // The tree may lack a Connected = true BlueZ did not announce: ask before trusting it.
        if (try? await system.tree.refresh(Self.device, at: path)) == nil || !isConnected { return true }
        let disconnected = try? await withTimeLimit(grace) { [self] in
            for await _ in changes where !isConnected { return true }
            return false
        }
        return disconnected == true
    }

    /// Why a subscribed characteristic's object left the tree: the link dropped (BlueZ drops a
    /// device's GATT objects as its ATT channel closes, before it announces `Connected = false`),
    /// or the peripheral's database changed while connected.
    func removalError(for characteristic: RemoteCharacteristic) async -> BluetoothError {
        guard await becomesDisconnected(within: Self.linkLossGrace) else {
            return characteristic.removedError(of: address)
        }
        return BluetoothError(.disconnected, message: "the peripheral disconnected")
    }

    func mtu(of characteristic: RemoteCharacteristic) -> Int? {
        guard let path = characteristic.id.path(device: path) else { return nil }
        return (try? system.tree.properties(of: Self.characteristic, at: path)?.decode("MTU", as: UInt16.self))
            .flatMap { $0 }.map(Int.init)
    }

    func subscribe(
        to characteristic: RemoteCharacteristic, into continuation: NotificationStream.Continuation,
        delivery: NotificationDelivery
    ) async throws {
        let socket: BlueZNotificationHub.SocketChoice =
            switch delivery.kind {
            case .bus: .never
            case .socket: .required
            case .automatic: characteristic.properties.contains(.notify) ? .preferred : .never
            }
        let object = try objectPath(characteristic)
        try await onAttribute(object, gone: { characteristic.removedError(of: address) }) {
            try await system.notifications.add(
                continuation, for: object, device: path, system: system, socket: socket,
                removed: { [self] in await removalError(for: characteristic) })
        }
    }

    static func options(offset: Int = 0, type: String? = nil) -> DBusValue {
        var entries: [DBusDictionaryEntry] = []
        if offset > 0 {
            entries.append(
                DBusDictionaryEntry(key: .string("offset"), value: .variant(.uint16(UInt16(clamping: offset)))))
        }
        if let type { entries.append(DBusDictionaryEntry(key: .string("type"), value: .variant(.string(type)))) }
        return .dictionary(key: .string, value: .variant, entries)
    }
}

extension BlueZPeripheralBackend {
    func openL2CAPChannel(psm: PSM, _ options: L2CAPOptions, timeout: Duration) async throws -> L2CAPChannel {
        guard let properties else {
            throw BluetoothError(.doesNotExist, message: "BlueZ does not know \(address): scan for it first")
        }
        let type = BluetoothAddress.AddressType(
            rawValue: (try? properties.decode("AddressType", as: String.self)) ?? "public")
        let adapterAddress = path.parent.flatMap { adapter in
            (try? system.tree.properties(of: BlueZAdapterBackend.interface, at: adapter)?.decode(
                "Address", as: String.self)).flatMap { BluetoothAddress($0) }
        }
        return try await KernelL2CAP.connect(
            to: address, type: type, psm: psm, from: adapterAddress, security: options.security,
            receiveMTU: options.receiveMTU, watermarks: options.watermarks, timeout: timeout)
    }
}
