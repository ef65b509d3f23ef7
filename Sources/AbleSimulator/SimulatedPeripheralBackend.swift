import Able
import AbleStreams
import Synchronization

/// A remote device seen from a simulated central.
struct SimulatedPeripheralBackend: PeripheralBackend {
    let radio: SimulatedRadio
    let central: BluetoothAddress
    let address: BluetoothAddress

    private var connection: RadioState.Connection { RadioState.Connection(central: central, peripheral: address) }

    var isConnected: Bool { radio.state.withLock { $0.connections.contains(connection) } }

    var isPaired: Bool { radio.state.withLock { $0.devices[address]?.paired.contains(central) == true } }

    /// Connects in simulated time: the link comes up after the peripheral's connection time,
    /// the services are resolved after its resolution time; a timeout shorter than that, or
    /// services that never resolve, end in ``BluetoothError/Code/timeout`` and a disconnection.
    func connect(timeout: Duration) async throws {
        let clock = radio.clock
        let start = clock.now
        let deadline = start.advanced(by: timeout)
        let timing = try radio.state.withLock { state in
            guard state.adapters[central]?.isPowered == true else {
                throw BluetoothError(
                    .notReady, message: "the adapter is powered off", errorName: "org.bluez.Error.NotReady")
            }
            guard let device = state.devices[address], device.isInRange,
                device.isAdvertising || device.advertisement == nil
            else {
                throw BluetoothError(.doesNotExist, message: "no device \(address) is in range: scan for it first")
            }
            return device.timing
        }
        guard !isConnected else { return }
        clock.noteActivity()
        guard timing.connectionTime <= timeout else {
            try await clock.sleep(until: deadline)
            throw BluetoothError(.timeout, message: "connecting to \(address) took longer than \(timeout)")
        }
        try await clock.sleep(until: start.advanced(by: timing.connectionTime))
        let (events, resolves) = try radio.state.withLock { state in
            guard state.adapters[central]?.isPowered == true else {
                throw BluetoothError(.notReady, message: "the adapter was powered off while connecting")
            }
            guard var device = state.devices[address], device.isInRange else {
                throw BluetoothError.fromBlueZ(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local")
            }
            if let (name, message) = device.connectFailure {
                device.connectFailure = nil
                state.devices[address] = device
                throw BluetoothError.fromBlueZ(name: name, message: message)
            }
            guard device.advertisement?.isConnectable != false else {
                throw BluetoothError(.connectionAttemptFailed, message: "\(address) is not connectable")
            }
            guard !state.connections.contains(connection) else { return (GATTServerEvents?.none, true) }
            state.connections.insert(connection)
            return (device.events, device.servicesResolve)
        }
        radio.connectionStateChanged(connection, to: .connecting)
        events?.connectionChanged(Central(address: central), true)
        do {
            if resolves {
                try await clock.sleep(until: min(deadline, clock.now.advanced(by: timing.serviceResolutionTime)))
                if timing.connectionTime + timing.serviceResolutionTime <= timeout {
                    guard isConnected else {
                        throw BluetoothError(
                            .disconnected, message: "\(address) disconnected before its services were resolved")
                    }
                    radio.connectionStateChanged(connection, to: .connected)
                    return
                }
            } else {
                try await clock.sleep(until: deadline)
            }
            throw BluetoothError(.timeout, message: "\(address) did not resolve its services within \(timeout)")
        } catch {
            // As on BlueZ: a connection that timed out or was cancelled is taken down.
            radio.disconnect(central: central, peripheral: address, reason: "the connection attempt ended")
            throw error
        }
    }

    func disconnect() async throws {
        radio.disconnect(central: central, peripheral: address, reason: nil)
    }

    func pair(with agent: PairingAgent, timeout: Duration) async throws {
        guard isConnected else { throw BluetoothError(.notConnected, message: "\(address) is not connected") }
        guard await agent.confirm(address, 123_456) else {
            throw BluetoothError.fromBlueZ(
                name: "org.bluez.Error.AuthenticationRejected", message: "Authentication Rejected")
        }
        radio.state.withLock { _ = $0.devices[address]?.paired.insert(central) }
    }

    func connectionStates() -> AsyncStream<Peripheral.ConnectionState> {
        let (stream, continuation) = AsyncStream<Peripheral.ConnectionState>.makeStream()
        let connection = self.connection
        let id = radio.state.withLock { state in
            let id = state.makeID()
            state.connectionListeners[connection, default: [:]][id] = continuation
            // Under the lock, so that no change slips in between the current state and the next.
            continuation.yield(state.connections.contains(connection) ? .connected : .disconnected(reason: nil))
            return id
        }
        continuation.onTermination = { [radio] _ in
            _ = radio.state.withLock { $0.connectionListeners[connection]?.removeValue(forKey: id) }
        }
        return stream
    }

    private func core() throws -> GATTServerCore {
        guard isConnected else { throw BluetoothError(.notConnected, message: "\(address) is not connected") }
        guard let core = radio.state.withLock({ $0.devices[address]?.core }) else {
            throw BluetoothError(.disconnected, message: "\(address) stopped serving")
        }
        return core
    }

    func services() throws -> [GATTService] {
        let definition = try core().definition
        return definition.services.enumerated().map { serviceIndex, service in
            GATTService(
                uuid: service.uuid, isPrimary: service.kind == .primary,
                characteristics: service.characteristics.enumerated().map { index, characteristic in
                    let id = AttributeID(service: serviceIndex, characteristic: index)
                    return GATTCharacteristic(
                        uuid: characteristic.uuid, serviceUUID: service.uuid, properties: characteristic.properties,
                        descriptors: cccd(of: characteristic, id)
                            + characteristic.descriptors.enumerated().map { descriptorIndex, descriptor in
                                GATTDescriptor(
                                    uuid: descriptor.uuid, characteristicUUID: characteristic.uuid,
                                    id: AttributeID(
                                        service: serviceIndex, characteristic: index, descriptor: descriptorIndex
                                    )
                                    .remote)
                            }, id: id.remote)
                }, id: RemoteAttributeID([UInt16(serviceIndex)]))
        }
    }

    func read(_ characteristic: GATTCharacteristic, offset: Int) async throws -> [UInt8] {
        try await attribute { try await $0.read($1, central: Central(address: central), offset: offset, mtu: mtu) }(
            characteristic.id)
    }

    func write(_ value: [UInt8], to characteristic: GATTCharacteristic, type: WriteType) async throws {
        try await attribute {
            try await $0.write(
                $1, value: value, offset: 0, kind: type == .withResponse ? .request : .command,
                central: Central(address: central), mtu: mtu)
        }(characteristic.id)
    }

    func read(_ descriptor: GATTDescriptor) async throws -> [UInt8] {
        if let characteristic = AttributeID(cccdOf: descriptor.id) {
            _ = try core()
            let key = RadioState.SubscriptionKey(central: central, peripheral: address, attribute: characteristic)
            let subscribed = radio.state.withLock { $0.subscriptions[key]?.isEmpty == false }
            return [subscribed ? 0x01 : 0x00, 0x00]
        }
        return try await attribute { try await $0.read($1, central: Central(address: central), offset: 0, mtu: mtu) }(
            descriptor.id)
    }

    func write(_ value: [UInt8], to descriptor: GATTDescriptor) async throws {
        if AttributeID(cccdOf: descriptor.id) != nil {
            // BlueZ keeps the Client Characteristic Configuration to itself: subscribe instead.
            throw BluetoothError.fromBlueZ(name: "org.bluez.Error.NotPermitted", message: "Write not permitted")
        }
        try await attribute {
            try await $0.write(
                $1, value: value, offset: 0, kind: .request, central: Central(address: central), mtu: mtu)
        }(descriptor.id)
    }

    /// Runs an ATT operation on the attribute a handle names, with the errors BlueZ would give.
    private func attribute<T: Sendable>(
        _ operation: @escaping @Sendable (GATTServerCore, AttributeID) async throws -> T
    ) -> @Sendable (RemoteAttributeID) async throws -> T {
        { [radio, central, address] remote in
            let core = try core()
            guard let id = AttributeID(remote: remote) else {
                throw BluetoothError(.doesNotExist, message: "no attribute \(remote)")
            }
            radio.clock.noteActivity()
            let (dropLink, injected) = radio.state.withLock { state -> (Bool, ATTError?) in
                guard var device = state.devices[address] else { return (false, nil) }
                defer { state.devices[address] = device }
                if device.dropLinkOnNextRequest {
                    device.dropLinkOnNextRequest = false
                    return (true, nil)
                }
                let injected = device.nextRequestError
                device.nextRequestError = nil
                return (false, injected)
            }
            if dropLink {
                radio.disconnect(central: central, peripheral: address, reason: "the link dropped during a request")
            }
            if let injected { throw BluetoothError.asBlueZReports(injected) }
            let result: T
            do {
                result = try await operation(core, id)
            } catch let error as ATTError {
                throw BluetoothError.asBlueZReports(error)
            }
            // A request whose link dropped while it was in flight gets no answer.
            guard isConnected else {
                throw BluetoothError(.disconnected, message: "\(address) disconnected during the request")
            }
            return result
        }
    }

    private var mtu: Int { radio.state.withLock { $0.devices[address]?.mtu ?? 23 } }

    func mtu(of characteristic: GATTCharacteristic) -> Int? { mtu }

    func subscribe(to characteristic: GATTCharacteristic, into continuation: NotificationStream.Continuation)
        async throws
    {
        let core = try core()
        guard let id = AttributeID(remote: characteristic.id) else {
            throw BluetoothError(.doesNotExist, message: "no attribute \(characteristic.id)")
        }
        let key = RadioState.SubscriptionKey(central: central, peripheral: address, attribute: id)
        let (subscriptionID, first, events) = radio.state.withLock { state in
            let subscriptionID = state.makeID()
            let first = state.subscriptions[key, default: [:]].isEmpty
            state.subscriptions[key, default: [:]][subscriptionID] = continuation
            return (subscriptionID, first, state.devices[address]?.events)
        }
        _ = core
        // BlueZ does not tell a GATT server which central subscribed.
        if first { events?.subscriptionChanged(nil, id, true) }
        continuation.onTermination { [radio] in
            let (last, events) = radio.state.withLock { state -> (Bool, GATTServerEvents?) in
                guard state.subscriptions[key]?.removeValue(forKey: subscriptionID) != nil else { return (false, nil) }
                let last = state.subscriptions[key]!.isEmpty
                if last { state.subscriptions[key] = nil }
                return (last, state.devices[key.peripheral]?.events)
            }
            if last { events?.subscriptionChanged(nil, id, false) }
        }
    }
}

/// The Client Characteristic Configuration descriptor BlueZ shows for a characteristic that
/// notifies or indicates, ahead of the declared descriptors as in BlueZ's handle order.
private func cccd(of characteristic: Characteristic, _ id: AttributeID) -> [GATTDescriptor] {
    guard !characteristic.properties.isDisjoint(with: [.notify, .indicate]) else { return [] }
    return [
        GATTDescriptor(
            uuid: .clientCharacteristicConfiguration, characteristicUUID: characteristic.uuid,
            id: RemoteAttributeID(id.remote.components + [AttributeID.cccdComponent]))
    ]
}

extension BluetoothError {
    /// The error the BlueZ backend gives when a remote GATT server answers `error`: BlueZ turns
    /// ATT errors into D-Bus errors (`create_gatt_dbus_error` in BlueZ's `src/gatt-client.c`),
    /// and the backend maps those.
    static func asBlueZReports(_ error: ATTError) -> BluetoothError {
        let (name, message): (String, String) =
            switch error {
            case .readNotPermitted: ("NotPermitted", "Read not permitted")
            case .writeNotPermitted: ("NotPermitted", "Write not permitted")
            case .insufficientAuthentication, .insufficientEncryption, .insufficientEncryptionKeySize:
                ("NotPermitted", "Not paired")
            case .invalidOffset: ("InvalidArguments", "Invalid offset")
            case .invalidAttributeValueLength: ("InvalidArguments", "Invalid Length")
            case .insufficientAuthorization: ("NotAuthorized", "Operation Not Authorized")
            case .requestNotSupported: ("NotSupported", "Operation is not supported")
            default: ("Failed", "Operation failed with ATT error: 0x" + String(error.rawValue, radix: 16).leftPadded(2))
            }
        return BluetoothError.fromBlueZ(name: "org.bluez.Error." + name, message: message)
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}

extension AttributeID {
    /// The last component of a Client Characteristic Configuration's identity, after its
    /// characteristic's: the simulator serves no descriptor at that index.
    static let cccdComponent = UInt16.max

    /// The characteristic whose Client Characteristic Configuration `remote` names.
    init?(cccdOf remote: RemoteAttributeID) {
        guard remote.components.count == 3, remote.components[2] == Self.cccdComponent else { return nil }
        self.init(remote: RemoteAttributeID(Array(remote.components.prefix(2))))
    }

    /// The identity a central's view of a simulated attribute carries: its indices.
    var remote: RemoteAttributeID {
        RemoteAttributeID(([service, characteristic] + (descriptor.map { [$0] } ?? [])).map { UInt16($0) })
    }

    init?(remote: RemoteAttributeID) {
        let parts = remote.components.map(Int.init)
        guard parts.count == 2 || (parts.count == 3 && parts[2] != Int(Self.cccdComponent)) else { return nil }
        self.init(service: parts[0], characteristic: parts[1], descriptor: parts.count == 3 ? parts[2] : nil)
    }
}

/// A GATT server on a simulated adapter.
struct SimulatedGATTServerBackend: GATTServerBackend {
    let radio: SimulatedRadio
    let address: BluetoothAddress

    func open(_ core: GATTServerCore, events: GATTServerEvents) async throws {
        radio.state.withLock { state in
            if state.devices[address] == nil {
                state.devices[address] = SimulatedDevice(address: address, advertisement: nil, rssi: -40, mtu: 23)
            }
            state.devices[address]?.core = core
            state.devices[address]?.events = events
        }
    }

    func close() async {
        for central in connectedCentrals {
            radio.disconnect(central: central.address, peripheral: address, reason: "server closed")
        }
        radio.state.withLock { state in
            state.devices[address]?.core = nil
            state.devices[address]?.events = nil
        }
    }

    func send(_ value: [UInt8], of characteristic: AttributeID, indicate: Bool, timeout: Duration) async throws {
        // A simulated central confirms an indication as it receives it.
        radio.deliver(value, from: address, attribute: characteristic)
    }

    var connectedCentrals: [Central] {
        radio.state.withLock { state in
            state.connections.filter { $0.peripheral == address }.map { Central(address: $0.central) }
                .sorted { $0.address < $1.address }
        }
    }

    func disconnect(_ central: Central) async throws {
        radio.disconnect(central: central.address, peripheral: address, reason: "disconnected by the peripheral")
    }
}

extension SimulatedRadio {
    /// Hands a notified value to every stream subscribed to the attribute.
    ///
    /// Injected faults apply here: a dropped notification reaches nobody, a delayed one arrives
    /// later in simulated time (in order with the other delayed ones).
    func deliver(_ value: [UInt8], from peripheral: BluetoothAddress, attribute: AttributeID) {
        let (streams, delay) = state.withLock { state -> ([NotificationStream.Continuation], Duration) in
            if let device = state.devices[peripheral], device.notificationsToDrop > 0 {
                state.devices[peripheral]?.notificationsToDrop -= 1
                return ([], .zero)
            }
            let streams = state.subscriptions.filter {
                $0.key.peripheral == peripheral && $0.key.attribute == attribute
            }
            .flatMap { $0.value.values }
            return (streams, state.devices[peripheral]?.notificationDelay ?? .zero)
        }
        guard delay > .zero else {
            for stream in streams { stream.yield(value) }
            return
        }
        clock.schedule(after: delay) {
            for stream in streams { stream.yield(value) }
        }
    }

    /// Ends a connection: its notification streams throw, the server hears of it.
    func disconnect(central: BluetoothAddress, peripheral: BluetoothAddress, reason: String?) {
        let (removed, streams, events) = state.withLock { state in
            let removed =
                state.connections.remove(RadioState.Connection(central: central, peripheral: peripheral)) != nil
            let keys = state.subscriptions.keys.filter { $0.central == central && $0.peripheral == peripheral }
            var streams: [NotificationStream.Continuation] = []
            for key in keys { streams += state.subscriptions.removeValue(forKey: key)?.values ?? [:].values }
            return (removed, streams, state.devices[peripheral]?.events)
        }
        dropL2CAPChannels(between: central, and: peripheral)
        guard removed else { return }
        connectionStateChanged(
            RadioState.Connection(central: central, peripheral: peripheral), to: .disconnected(reason: reason))
        for stream in streams {
            stream.finish(throwing: BluetoothError(.disconnected, message: reason ?? "the peripheral disconnected"))
        }
        events?.connectionChanged(Central(address: central), false)
    }

    /// Tells a connection's state listeners (``Peripheral/connectionStates()``) about a change.
    func connectionStateChanged(_ connection: RadioState.Connection, to newState: Peripheral.ConnectionState) {
        let listeners = state.withLock { Array(($0.connectionListeners[connection] ?? [:]).values) }
        for listener in listeners { listener.yield(newState) }
    }

    /// An adapter powered off loses its connections and scans.
    func poweredOff(_ adapter: BluetoothAddress) {
        let (connections, scans) = state.withLock { state in
            (
                state.connections.filter { $0.central == adapter || $0.peripheral == adapter },
                state.scans.filter { $0.value.adapter == adapter }
            )
        }
        for connection in connections {
            disconnect(
                central: connection.central, peripheral: connection.peripheral, reason: "the adapter was powered off")
        }
        let links = state.withLock { state in
            state.channels.values.filter { $0.central == adapter || $0.peripheral == adapter }
        }
        for link in links { dropL2CAPChannels(between: link.central, and: link.peripheral) }
        for scan in scans.values {
            scan.continuation.finish(throwing: BluetoothError(.notPowered, message: "the adapter was powered off"))
        }
    }

    /// Tells an adapter's state listeners about a change.
    func adapterChanged(_ adapter: BluetoothAddress) {
        let (listeners, state) = self.state.withLock { state in
            (
                Array((state.adapterListeners[adapter] ?? [:]).values),
                state.adapters[adapter]?.publicState(discovering: state.scans.values.contains { $0.adapter == adapter })
            )
        }
        guard let state else { return }
        for listener in listeners { listener.yield(state) }
    }

    /// Reports one device to one scan, if the scan still runs and the device still advertises.
    func deliver(_ device: BluetoothAddress, to scanID: UInt64) {
        let delivery = state.withLock { state -> (ScanStream.Continuation, Discovery)? in
            guard let scan = state.scans[scanID], scan.adapter != device,
                state.adapters[scan.adapter]?.isPowered == true, let discovery = state.devices[device]?.discovery,
                scan.filter.matches(discovery)
            else { return nil }
            return (scan.continuation, discovery)
        }
        if let (continuation, discovery) = delivery { continuation.yield(discovery) }
    }
}
