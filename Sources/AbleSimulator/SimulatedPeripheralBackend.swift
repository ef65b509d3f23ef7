import AbleCore
import AbleIO

/// A remote device seen from a simulated central.
struct SimulatedPeripheralBackend: PeripheralBackend {
    let radio: SimulatedRadio
    let central: BluetoothAddress
    let address: BluetoothAddress
    /// The address type the central expects, when it found the device in a scan.
    var addressType: BluetoothAddress.AddressType? = nil

    private var connection: RadioState.Connection { RadioState.Connection(central: central, peripheral: address) }

    var isConnected: Bool { radio.state.withLock { $0.connections.contains(connection) } }

    /// Whether the link is down now, or goes down within `grace` of simulated time.
    private func linkDrops(within grace: Duration) async throws -> Bool {
        let deadline = radio.clock.now.advanced(by: grace)
        while isConnected {
            guard radio.clock.now < deadline else { return false }
            try await radio.clock.sleep(for: .milliseconds(50))
        }
        return true
    }

    var isPaired: Bool { radio.state.withLock { $0.devices[address]?.paired.contains(central) == true } }

    /// Connects in simulated time: the link comes up after the peripheral's connection time,
    /// the services are resolved after its resolution time; a timeout shorter than that, or
    /// services that never resolve, end in ``BluetoothError/Code/timeout`` and a disconnection.
    func connect(timeout: Duration) async throws {
        do {
            try await connectUntraced(timeout: timeout)
        } catch {
            radio.record(.connectionFailed, "\(central) → \(address): \(error)")
            throw error
        }
    }

    private func connectUntraced(timeout: Duration) async throws {
        let clock = radio.clock
        let deadline = clock.now.advanced(by: timeout)
        let (timing, known) = try radio.state.withLock { state in
            guard state.adapters[central] != nil else {
                throw state.absence(of: central, "the adapter was removed")
            }
            guard state.adapters[central]?.isPowered == true else {
                throw BluetoothError(.notReady, message: "the adapter is powered off")
            }
            let known = state.knownDevices[central]?[address] != nil
            if state.knownDevices[central]?[address]?.isBlocked == true {
                throw BluetoothError(.failed, message: "the device is blocked")
            }
            guard let device = state.devices[address], device.isInRange,
                addressType == nil || addressType == device.addressType,
                device.isAdvertising || device.advertisement == nil
            else {
                guard known else { return (SimulatedPeripheral.Timing?.none, known) }
                throw BluetoothError(.doesNotExist, message: "no device \(address) is in range: scan for it first")
            }
            return (device.timing, known)
        }
        guard !isConnected else { return }
        clock.noteActivity()
        // As on BlueZ: an address the adapter does not know is looked for with a scan first,
        // within the same timeout.
        // Until the link is up, the adapter's removal ends the wait at once.
        guard let timing else {
            try await radio.sleep(until: deadline, whileAdapterPresent: central)
            throw BluetoothError(.timeout, message: "no device \(address) was found within \(timeout)")
        }
        var timeout = timeout
        if !known {
            guard timing.advertisingInterval <= timeout else {
                try await radio.sleep(until: deadline, whileAdapterPresent: central)
                throw BluetoothError(.timeout, message: "no device \(address) was found within \(timeout)")
            }
            try await radio.sleep(
                until: clock.now.advanced(by: timing.advertisingInterval), whileAdapterPresent: central)
            radio.remember(address, by: central)
            timeout -= timing.advertisingInterval
        }
        let start = clock.now
        guard timing.connectionTime <= timeout else {
            try await radio.sleep(until: deadline, whileAdapterPresent: central)
            throw BluetoothError(.timeout, message: "connecting to \(address) took longer than \(timeout)")
        }
        try await radio.sleep(until: start.advanced(by: timing.connectionTime), whileAdapterPresent: central)
        let (events, resolves) = try radio.state.withLock { state in
            guard state.adapters[central] != nil else {
                throw state.absence(of: central, "the adapter was removed while connecting")
            }
            guard state.adapters[central]?.isPowered == true else {
                throw BluetoothError(.notReady, message: "the adapter was powered off while connecting")
            }
            guard var device = state.devices[address], device.isInRange else {
                throw SimulatedPeripheral.ConnectionFailure.leConnectionAbortByLocal.error
            }
            if let failure = device.connectFailure {
                device.connectFailure = nil
                state.devices[address] = device
                throw failure.error
            }
            guard device.advertisement?.isConnectable != false else {
                throw BluetoothError(.connectionAttemptFailed, message: "\(address) is not connectable")
            }
            guard !state.connections.contains(connection) else { return (GATTServerEvents?.none, true) }
            state.connections.insert(connection)
            return (device.events, device.servicesResolve)
        }
        radio.record(.connected, "\(central) → \(address)")
        radio.connectionStateChanged(connection, to: .connecting)
        events?.connectionChanged(CentralConnectionChange(central: Central(address: central), isConnected: true))
        do {
            if resolves {
                try await clock.sleep(until: min(deadline, clock.now.advanced(by: timing.serviceResolutionTime)))
                if timing.connectionTime + timing.serviceResolutionTime <= timeout {
                    guard isConnected else {
                        throw BluetoothError(
                            .disconnected, message: "\(address) disconnected before its services were resolved")
                    }
                    radio.connectionStateChanged(connection, to: .connected)
                    radio.refreshServiceListeners(of: connection)
                    radio.remember(address, by: central)
                    return
                }
            } else {
                try await clock.sleep(until: deadline)
            }
            throw BluetoothError(.timeout, message: "\(address) did not resolve its services within \(timeout)")
        } catch {
            // As on BlueZ: a connection that timed out or was cancelled is taken down.
            radio.disconnect(
                central: central, peripheral: address,
                reason: BluetoothError(.disconnected, message: "the connection attempt ended"))
            throw error
        }
    }

    func disconnect() async throws {
        radio.disconnect(central: central, peripheral: address, reason: nil)
    }

    func pair(with agent: PairingAgent, timeout: Duration) async throws {
        guard isConnected else { throw BluetoothError(.notConnected, message: "\(address) is not connected") }
        try await radio.pair(central: central, peripheral: address, initiator: agent)
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

    func core() throws -> GATTServerCore {
        guard isConnected else { throw BluetoothError(.notConnected, message: "\(address) is not connected") }
        guard let core = radio.state.withLock({ $0.devices[address]?.core }) else {
            throw BluetoothError(.disconnected, message: "\(address) stopped serving")
        }
        return core
    }

    func services() throws -> [RemoteService] {
        guard isConnected else { throw BluetoothError(.notConnected, message: "\(address) is not connected") }
        // A device that stopped serving shows an empty database, as BlueZ does once its
        // application is unregistered.
        return radio.state.withLock { $0.devices[address]?.core }.map { SimulatedRadio.servicesView(of: $0.definition) }
            ?? []
    }

    func serviceChanges() -> AsyncStream<ServiceChange> {
        radio.serviceChanges(of: connection)
    }

    /// Throws ``BluetoothError/Code/attributeRemoved`` when the characteristic is no longer in
    /// the database as it was found (its handle may now hold another one).
    private func check(_ characteristic: RemoteCharacteristic) throws {
        guard try services().contains(where: { $0.characteristics.contains(characteristic) }) else {
            throw characteristic.removedError(of: address)
        }
    }

    private func check(_ descriptor: RemoteDescriptor) throws {
        guard try services().contains(where: { $0.characteristics.contains { $0.descriptors.contains(descriptor) } })
        else { throw descriptor.removedError(of: address) }
    }

    func read(_ characteristic: RemoteCharacteristic, offset: Int) async throws -> [UInt8] {
        try check(characteristic)
        return try await attribute(.read) {
            try await $0.read($1, central: Central(address: central), offset: offset, mtu: mtu)
        }(
            characteristic.id)
    }

    /// Writes as BlueZ's client does: a value that fits one PDU, at offset 0 and not reliably,
    /// in one request or command; otherwise a long write, pieces of the MTU less 5 bytes
    /// prepared in order (the first offered to a server that authorizes prepared writes, as BlueZ
    /// does) and then
    /// executed in order.
    func write(_ value: [UInt8], to characteristic: RemoteCharacteristic, type: WriteType, offset: Int) async throws {
        try check(characteristic)
        let mtu = self.mtu
        let central = Central(address: central)
        guard type == .reliable || offset > 0 || value.count > mtu - 3 else {
            // A Write Command gets no answer, so nothing raises the link's security: a server
            // drops one that its link is not secure enough for, as BlueZ does.
            if type == .withoutResponse, !commandAllowed(to: characteristic) { return }
            try await attribute(.write, answered: type != .withoutResponse) {
                try await $0.write(
                    $1, value: value, offset: 0, kind: type == .withoutResponse ? .command : .request,
                    central: central, mtu: mtu)
            }(characteristic.id)
            return
        }
        let pieceLength = max(mtu - 5, 1)
        let pieces = stride(from: 0, to: max(value.count, 1), by: pieceLength).map { start in
            (offset: offset + start, value: Array(value[start..<min(start + pieceLength, value.count)]))
        }
        let kind: WriteRequest.Kind = type == .reliable ? .reliable : .request
        try await attribute(.write) { core, id in
            // BlueZ asks the server to authorize the first prepared piece of a write only: once
            // authorized, the rest of the queue is, until it is executed.
            if core.characteristic(id).permissions.contains(.authorizePreparedWrites), let first = pieces.first {
                try await core.write(
                    id, value: first.value, offset: first.offset, kind: kind, central: central, mtu: mtu,
                    prepared: true)
            }
            for piece in pieces {
                try await core.write(
                    id, value: piece.value, offset: piece.offset, kind: kind, central: central, mtu: mtu)
            }
        }(characteristic.id)
    }

    func read(_ descriptor: RemoteDescriptor) async throws -> [UInt8] {
        try check(descriptor)
        if let characteristic = AttributeID(cccdOf: descriptor.id) {
            _ = try core()
            let key = RadioState.SubscriptionKey(central: central, peripheral: address, attribute: characteristic)
            let subscribed = radio.state.withLock { $0.subscriptions[key]?.isEmpty == false }
            return [subscribed ? 0x01 : 0x00, 0x00]
        }
        return try await attribute(.read) {
            try await $0.read($1, central: Central(address: central), offset: 0, mtu: mtu)
        }(
            descriptor.id)
    }

    func write(_ value: [UInt8], to descriptor: RemoteDescriptor) async throws {
        try check(descriptor)
        if AttributeID(cccdOf: descriptor.id) != nil {
            // BlueZ keeps the Client Characteristic Configuration to itself: subscribe instead.
            throw BluetoothError.asGATTClientReports(.writeNotPermitted)
        }
        try await attribute(.write) {
            try await $0.write(
                $1, value: value, offset: 0, kind: .request, central: Central(address: central), mtu: mtu)
        }(descriptor.id)
    }

    /// Runs an ATT operation on the attribute a handle names, with the errors BlueZ would give,
    /// and records it in the radio's trace.
    ///
    /// `answered` is false for a Write Command, which gets no response and so no response delay.
    private func attribute<T: Sendable>(
        _ access: SimulatedAccess, answered: Bool = true,
        _ operation: @escaping @Sendable (GATTServerCore, AttributeID) async throws -> T
    ) -> @Sendable (RemoteAttributeID) async throws -> T {
        let untraced = untracedAttribute(access, answered: answered, operation)
        return { [radio, central, address] remote in
            let what = "\(central) → \(address) \(answered ? "\(access)" : "write-command")"
            let traced = AttributeID(remote: remote).map { "\(what) \($0.traced)" } ?? "\(what) \(remote)"
            radio.record(.request, traced)
            do {
                let result = try await untraced(remote)
                radio.record(.response, "\(traced) ok")
                return result
            } catch {
                radio.record(.response, "\(traced) \(error)")
                throw error
            }
        }
    }

    private func untracedAttribute<T: Sendable>(
        _ access: SimulatedAccess, answered: Bool,
        _ operation: @escaping @Sendable (GATTServerCore, AttributeID) async throws -> T
    ) -> @Sendable (RemoteAttributeID) async throws -> T {
        { [radio, central, address] remote in
            let core = try core()
            guard let id = AttributeID(remote: remote) else {
                throw BluetoothError(.doesNotExist, message: "no attribute \(remote)")
            }
            radio.clock.noteActivity()
            let (dropLink, injected, wait) = radio.state.withLock { state -> (Bool, ATTError?, Duration) in
                guard var device = state.devices[address] else { return (false, nil, .zero) }
                defer { state.devices[address] = device }
                if device.dropLinkOnNextRequest {
                    device.dropLinkOnNextRequest = false
                    return (true, nil, .zero)
                }
                let injected = device.nextRequestError
                device.nextRequestError = nil
                // A slow peripheral, and connection events the link misses, hold the answer.
                let wait = answered ? device.responseDelay + device.linkQuality.missedEventsDelay() : .zero
                return (false, injected, wait)
            }
            if wait > .zero {
                try await radio.clock.sleep(for: wait)
                guard isConnected else {
                    throw BluetoothError(.disconnected, message: "\(address) disconnected during the request")
                }
            }
            if dropLink {
                radio.disconnect(
                    central: central, peripheral: address,
                    reason: BluetoothError(.linkTimeout, message: "the link dropped during a request"))
            }
            if let injected { throw BluetoothError.asGATTClientReports(injected) }
            // The server refuses a link short of the attribute's security before any handler
            // runs; the central pairs and tries again.
            if let permissions = core.permissions(of: id) {
                try await radio.secure(access, to: permissions, central: central, peripheral: address)
            }
            let result: T
            do {
                result = try await operation(core, id)
            } catch let error as ATTError {
                let reported = BluetoothError.asGATTClientReports(error)
                // As Able reports it on BlueZ: an Unlikely Error with the link dropping within
                // the grace is the disconnect (a server disconnecting its central answers the
                // central's pending requests with it first).
                guard error == .unlikelyError, try await linkDrops(within: Self.linkLossGrace) else { throw reported }
                throw BluetoothError(
                    .disconnected, message: "\(address) disconnected during the request", cause: reported,
                    attError: error)
            }
            // A request whose link dropped while it was in flight gets no answer.
            guard isConnected else {
                throw BluetoothError(.disconnected, message: "\(address) disconnected during the request")
            }
            return result
        }
    }

    /// Whether the link is secure enough for a Write Command to `characteristic`.
    func commandAllowed(to characteristic: RemoteCharacteristic) -> Bool {
        guard let id = AttributeID(remote: characteristic.id), let core = try? core(),
            let permissions = core.permissions(of: id)
        else { return true }
        return radio.linkSecurity(central: central, peripheral: address)
            >= SimulatedLinkSecurity(requiredBy: permissions, for: .write)
    }

    var mtu: Int { radio.state.withLock { $0.linkMTU(central: central, peripheral: address) } }

    func mtu(of characteristic: RemoteCharacteristic) -> Int? { mtu }

    func subscribe(
        to characteristic: RemoteCharacteristic, into continuation: NotificationStream.Continuation,
        delivery: NotificationDelivery
    ) async throws {
        try check(characteristic)
        guard let id = AttributeID(remote: characteristic.id) else {
            throw BluetoothError(.doesNotExist, message: "no attribute \(characteristic.id)")
        }
        let core = try core()
        if let permissions = core.permissions(of: id) {
            try await radio.secure(.subscribe, to: permissions, central: central, peripheral: address)
        }
        let throughSocket =
            switch delivery.kind {
            case .bus: false
            case .socket, .automatic: characteristic.properties.contains(.notify)
            }
        if throughSocket {
            try subscribeThroughSocket(to: characteristic, into: continuation) { register($0, to: id) }
        } else {
            register(continuation, to: id)
        }
    }

    /// Adds a stream to the attribute's subscribers, and takes it out when it ends.
    private func register(_ continuation: NotificationStream.Continuation, to id: AttributeID) {
        let key = RadioState.SubscriptionKey(central: central, peripheral: address, attribute: id)
        continuation.setHandOffObserver { [clock = radio.clock] in clock.handOffEnded() }
        let (subscriptionID, first, events) = radio.state.withLock { state in
            let subscriptionID = state.makeID()
            let first = state.subscriptions[key, default: [:]].isEmpty
            state.subscriptions[key, default: [:]][subscriptionID] = continuation
            return (subscriptionID, first, state.devices[address]?.events)
        }
        radio.record(.subscribed, "\(central) → \(address) \(id.traced)")
        // Unlike BlueZ before 5.69, the simulator always says which central subscribed.
        if first { events?.subscriptionChanged(Central(address: central), id, true) }
        continuation.onTermination { [radio] in
            let (last, events) = radio.state.withLock { state -> (Bool, GATTServerEvents?) in
                guard state.subscriptions[key]?.removeValue(forKey: subscriptionID) != nil else { return (false, nil) }
                let last = state.subscriptions[key]!.isEmpty
                if last { state.subscriptions[key] = nil }
                return (last, state.devices[key.peripheral]?.events)
            }
            if last { events?.subscriptionChanged(Central(address: key.central), id, false) }
            // A value it held for its consumer no longer holds time back.
            radio.clock.handOffEnded()
        }
    }
}
