import AbleIO

/// A remote device, seen from this adapter: connect to it, use its GATT services, and receive
/// its notifications.
///
/// ```swift
/// let peripheral = await adapter.peripheral(for: discovery)
/// try await peripheral.connect(timeout: .seconds(10))
/// let level = try await peripheral.read(Characteristics.batteryLevel)
/// for try await value in try await peripheral.notifications(of: Characteristics.measurement).prefix(5) {
///     print(value)
/// }
/// try await peripheral.disconnect()
/// ```
///
/// GATT operations on one peripheral run one at a time, in the order they were asked for,
/// since BlueZ answers `InProgress` to overlapping ones. A task cancelled while its operation
/// waits for its turn throws `CancellationError` at once, and nothing of it reaches BlueZ.
///
/// The peripheral keeps little state of its own (its backend follows the connection, a lock puts
/// the GATT operations in line, and it remembers which characteristics it has used, to say when a
/// service change removed one): it is an actor so that it is shared between tasks as safely as
/// the other public types and its members are awaited like theirs.
public actor Peripheral {
    /// Where a connection stands.
    public enum ConnectionState: Sendable, Hashable, CustomStringConvertible {
        /// Not connected. `reason` says why the last link ended, as a ``BluetoothError`` whose
        /// ``BluetoothError/code`` an app can switch on: ``BluetoothError/Code/peerDisconnected``,
        /// ``BluetoothError/Code/locallyDisconnected``, ``BluetoothError/Code/linkTimeout``,
        /// ``BluetoothError/Code/authenticationFailed``, or ``BluetoothError/Code/disconnected``
        /// when the backend does not know more. BlueZ 5.83 and later announce the reason
        /// (`Device1.Disconnected`); earlier BlueZ reports none over D-Bus, so there it is `nil`
        /// unless the device itself went away. `nil` also before any link. A simulated radio gives
        /// the reason of the fault that ended the link.
        case disconnected(reason: BluetoothError?)
        /// Linked, but the services are not resolved yet.
        case connecting
        /// Linked, with the services resolved: GATT operations can go ahead.
        case connected
        /// Being taken down. BlueZ announces no such state, so neither backend reports it today;
        /// handle it like ``disconnected(reason:)`` in a `switch`.
        case disconnecting

        public var description: String {
            switch self {
            case .disconnected(let reason?): "disconnected (\(reason.message))"
            case .disconnected: "disconnected"
            case .connecting: "connecting"
            case .connected: "connected"
            case .disconnecting: "disconnecting"
            }
        }
    }

    package let backend: any PeripheralBackend
    private let queue = FIFOLock()
    /// The characteristics (service and characteristic UUID) looked up so far, to tell one a
    /// service change removed from one the peripheral never had.
    private var used: Set<CharacteristicKey> = []
    /// The write sockets that writes without response have used, by service and characteristic
    /// UUID: a write that finds its socket here open goes straight into it from the caller's
    /// thread, without entering the actor or looking the characteristic up again.
    private nonisolated let writeSockets = Lock<[CharacteristicKey: WriteSocketEntry]>([:])

    private struct WriteSocketEntry: Sendable {
        let socket: AcquiredSocket
        let characteristic: RemoteCharacteristic
    }

    /// The peripheral's address.
    public nonisolated let address: BluetoothAddress

    /// Whether ``address`` is public or random, when it is known: the type a scan reported, for a
    /// peripheral obtained from a ``Discovery``; `nil` for one obtained by address alone, which
    /// connects to the device of that address whatever its type.
    public nonisolated let addressType: BluetoothAddress.AddressType?

    init(backend: any PeripheralBackend, addressType: BluetoothAddress.AddressType? = nil) {
        self.backend = backend
        self.address = backend.address
        self.addressType = addressType
    }

    /// Whether the peripheral is connected now.
    public var isConnected: Bool { backend.isConnected }

    /// Connects and waits until the peripheral's services are resolved.
    ///
    /// - Parameter timeout: How long the whole connection may take, services included.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/timeout`` when `timeout` elapses,
    ///   ``BluetoothError/Code/disconnected`` when the link drops before the services are resolved,
    ///   ``BluetoothError/Code/adapterRemoved`` or ``BluetoothError/Code/daemonUnavailable`` at once
    ///   when the adapter or `bluetoothd` goes away meanwhile, or what BlueZ answered (for example ``BluetoothError/Code/connectionAttemptFailed`` with
    ///   BlueZ's reason such as `le-connection-abort-by-local`). `CancellationError` when the task
    ///   is cancelled. After a timeout or cancellation, Able disconnects so BlueZ stops trying.
    ///   ``BluetoothError/Code/invalidArguments`` for a negative `timeout`, before asking BlueZ.
    ///
    /// The corresponding BlueZ method is `org.bluez.Device1.Connect`.
    public func connect(timeout: Duration = .seconds(30)) async throws {
        try InputChecks.timeout(timeout, of: "connecting")
        try await backend.connect(timeout: timeout)
    }

    /// Disconnects; does nothing when not connected.
    ///
    /// The corresponding BlueZ method is `org.bluez.Device1.Disconnect`.
    public func disconnect() async throws {
        try await backend.disconnect()
    }

    /// Runs `body` on the connected peripheral, where the caller is, then disconnects whatever
    /// `body` does, even when the task is cancelled (so that BlueZ still gets the `Disconnect`).
    package func disconnecting<T>(
        isolation: isolated (any Actor)? = #isolation, after body: (Peripheral) async throws -> sending T
    ) async throws -> sending T {
        let backend = self.backend
        do {
            let result = try await body(self)
            await runEvenIfCancelled { try? await backend.disconnect() }
            return result
        } catch {
            await runEvenIfCancelled { try? await backend.disconnect() }
            throw error
        }
    }

    /// Whether the peripheral is paired (bonded or not).
    public var isPaired: Bool { backend.isPaired }

    /// Pairs with the peripheral, answering its requests with `agent`.
    ///
    /// Able registers `agent` with BlueZ while pairing; it is asked only about this peripheral
    /// (requests about other devices go to the adapters' standing agents; see
    /// ``Adapter/setPairingAgent(_:asSystemDefault:)``). Cancelling the task cancels the pairing in
    /// BlueZ.
    ///
    /// The corresponding BlueZ methods are `org.bluez.Device1.Pair` and `CancelPairing`.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/authenticationFailed``,
    ///   ``BluetoothError/Code/authenticationRejected`` (the agent refused),
    ///   ``BluetoothError/Code/authenticationCanceled``, ``BluetoothError/Code/timeout``, or
    ///   ``BluetoothError/Code/alreadyExists`` when already paired;
    ///   ``BluetoothError/Code/invalidArguments`` for a negative `timeout`, before asking BlueZ.
    public func pair(with agent: PairingAgent = .justWorks, timeout: Duration = .seconds(60)) async throws {
        try InputChecks.timeout(timeout, of: "pairing")
        try await backend.pair(with: agent, timeout: timeout)
    }

    /// The connection's states from now on, starting with the current one.
    ///
    /// Buffering: every change is kept until consumed (they are few).
    ///
    /// Cancelling the task that iterates ends the stream: `next()` returns `nil` once the
    /// values already buffered are taken, and the work behind the stream stops. Here the
    /// work is watching the connection.
    public func connectionStates() -> AsyncStream<ConnectionState> {
        backend.connectionStates()
    }

    /// The peripheral's services, as resolved after connecting.
    ///
    /// - Throws: ``BluetoothError/Code/notConnected`` when not connected.
    public func services() throws -> [RemoteService] {
        try backend.services()
    }

    /// The changes of the peripheral's GATT database from now on: services, characteristics or
    /// descriptors that went or came while connected (the peripheral sent Service Changed, as
    /// after a firmware update or when its GATT application is registered again, and BlueZ
    /// discovered the range again), or a reconnection that found a different database.
    ///
    /// Each ``ServiceChange`` carries the whole database as it is after the change, and what was
    /// removed and added; ``services()`` and the lookups by identifier already give the new
    /// database when it arrives. A change is reported once the database has been quiet for a
    /// moment (250 ms on BlueZ, which announces each object separately), so each Service Changed
    /// indication the peripheral sends is usually one event: a BlueZ peripheral that unregisters
    /// one GATT application and registers another sends two (the old range, then the new one),
    /// which come as two events, the removal and then the addition. The first services resolved
    /// after the stream was made while disconnected are not a change.
    ///
    /// Buffering: the 32 newest changes; a consumer further behind loses the oldest ones, and
    /// the newest it takes still carries the whole database.
    ///
    /// Cancelling the task that iterates ends the stream; it also ends when the peripheral's
    /// adapter or Bluetooth daemon goes away.
    ///
    /// - Important: Operations on a characteristic the change removed throw
    ///   ``BluetoothError/Code/attributeRemoved`` naming it by UUID and service (when this
    ///   `Peripheral` used it before; ``BluetoothError/Code/doesNotExist``, also naming it, for one
    ///   it never used), as does an operation the change overtook in BlueZ; its notification
    ///   streams end with ``BluetoothError/Code/attributeRemoved``.
    ///
    /// BlueZ reports the change as `InterfacesRemoved` and `InterfacesAdded` of the device's
    /// `org.bluez.GattService1`, `GattCharacteristic1` and `GattDescriptor1` objects, and
    /// `Device1.ServicesResolved`.
    public func serviceChanges() -> AsyncStream<ServiceChange> {
        backend.serviceChanges()
    }

    /// The discovered characteristic a typed identifier names.
    ///
    /// - Throws: ``BluetoothError/Code/attributeRemoved`` when this peripheral value found it
    ///   before and the peripheral's services changed since (see ``serviceChanges()``);
    ///   ``BluetoothError/Code/doesNotExist`` when the peripheral has no such characteristic in
    ///   that service. Either message names the characteristic and its service.
    public func characteristic(_ identifier: some CharacteristicIdentifier) throws -> RemoteCharacteristic {
        let services = try backend.services()
        let key = CharacteristicKey(identifier)
        let (serviceUUID, uuid) = (key.service, key.characteristic)
        guard
            let characteristic = services.first(where: { $0.uuid == serviceUUID })?.characteristics.first(where: {
                $0.uuid == uuid
            })
        else {
            if used.contains(key) {
                throw BluetoothError(
                    .attributeRemoved,
                    message: "characteristic \(uuid) of service \(serviceUUID) is gone: \(address) "
                        + "changed its services")
            }
            guard services.contains(where: { $0.uuid == serviceUUID }) else {
                throw BluetoothError(
                    .doesNotExist,
                    message: "\(address) has no service \(serviceUUID) (for characteristic \(uuid))")
            }
            throw BluetoothError(.doesNotExist, message: "service \(serviceUUID) has no characteristic \(uuid)")
        }
        used.insert(key)
        return characteristic
    }

    /// The discovered descriptor a typed identifier names.
    public func descriptor(_ identifier: some DescriptorIdentifier) throws -> RemoteDescriptor {
        let characteristic = try characteristic(identifier.characteristic)
        let uuid = identifier.uuid
        guard let descriptor = characteristic.descriptors.first(where: { $0.uuid == uuid }) else {
            throw BluetoothError(.doesNotExist, message: "\(characteristic) has no descriptor \(uuid)")
        }
        return descriptor
    }

    /// Reads a characteristic's value.
    ///
    /// The corresponding BlueZ method is `org.bluez.GattCharacteristic1.ReadValue`.
    /// - Throws: ``BluetoothError``, with ``BluetoothError/attError`` set when the peripheral
    ///   answered with an ATT error; ``BluetoothError/Code/disconnected`` when the link drops;
    ///   ``BluetoothError/Code/invalidOffset`` for an `offset` outside 0–511, before sending
    ///   anything.
    public func read(_ identifier: some CharacteristicIdentifier, offset: Int = 0) async throws -> [UInt8] {
        try InputChecks.readOffset(offset)
        let characteristic = try characteristic(identifier)
        return try await queue.withLock { [backend] in try await backend.read(characteristic, offset: offset) }
    }

    /// Writes a characteristic's value.
    ///
    /// A write without response goes into the characteristic's own socket when the backend
    /// grants one (BlueZ `AcquireWrite`, for a characteristic that allows write without
    /// response): no D-Bus call per write, and the write returns as soon as the socket has taken
    /// the value. When the socket is full, the write waits for room: nothing is ever dropped,
    /// and writes leave in the order they were made. Able acquires the socket on the first such
    /// write and keeps it until the link ends, the characteristic goes away, or a write with
    /// response (which BlueZ refuses while the socket is held) releases it; the next write
    /// without response acquires it again. Where BlueZ refuses the socket, writes go over the bus.
    /// Once a write has found the socket, the next ones go into it from the caller's thread,
    /// without entering the peripheral's actor or waiting for other operations; only a write that
    /// finds the socket full waits, for room.
    ///
    /// A write with response longer than one ATT PDU, or with an `offset`, is a long write
    /// (Prepare and Execute Write Requests, which BlueZ runs); ``WriteType/reliable`` makes it a
    /// reliable write.
    ///
    /// - Parameters:
    ///   - value: The bytes to write.
    ///   - identifier: The characteristic.
    ///   - type: How to write.
    ///   - offset: Where in the characteristic's value the bytes go; only with
    ///     ``WriteType/withResponse`` and ``WriteType/reliable``.
    ///
    /// The corresponding BlueZ methods are `org.bluez.GattCharacteristic1.WriteValue` (options
    /// `type` and `offset`) and `AcquireWrite`.
    /// - Throws: ``BluetoothError/Code/valueTooLong`` before sending anything when `value` is longer
    ///   than ``maximumWriteLength(for:type:)`` (for a socket, than its MTU allows, which the message
    ///   names), or when `offset` and `value` together pass 512 bytes;
    ///   ``BluetoothError/Code/invalidArguments`` for an offset with a write without response;
    ///   ``BluetoothError/Code/disconnected`` when the link drops (a socket write also when the
    ///   socket was closed under it); otherwise what the peripheral answered.
    public nonisolated(nonsending) func write(
        _ value: [UInt8], to identifier: some CharacteristicIdentifier, type: WriteType = .withResponse,
        offset: Int = 0
    ) async throws {
        // The hot path of a write without response: the socket a write before used, still open.
        if type == .withoutResponse, offset == 0, let entry = openWriteSocket(for: identifier) {
            try await Self.send(value, into: entry.socket, of: entry.characteristic)
            return
        }
        try await writeLookingUp(value, to: identifier, type: type, offset: offset)
    }

    /// The open write socket a write without response to `identifier` used before, if any.
    private nonisolated func openWriteSocket(for identifier: some CharacteristicIdentifier) -> WriteSocketEntry? {
        let key = CharacteristicKey(identifier)
        guard let entry = writeSockets.withLock({ $0[key] }) else { return nil }
        guard entry.socket.acceptsWrites else {
            writeSockets.withLock { if $0[key]?.socket === entry.socket { $0[key] = nil } }
            return nil
        }
        return entry
    }

    /// ``write(_:to:type:offset:)`` on the actor: looks the characteristic up and finds or acquires
    /// its socket.
    private func writeLookingUp(
        _ value: [UInt8], to identifier: some CharacteristicIdentifier, type: WriteType, offset: Int
    ) async throws {
        let characteristic = try characteristic(identifier)
        guard offset >= 0, offset == 0 || type != .withoutResponse else {
            throw BluetoothError(
                .invalidArguments, message: "a write without response cannot have an offset (\(offset))")
        }
        if type == .withoutResponse, let socket = try await backend.writeSocket(for: characteristic) {
            writeSockets.withLock {
                $0[CharacteristicKey(identifier)] = WriteSocketEntry(
                    socket: socket, characteristic: characteristic)
            }
            try await Self.send(value, into: socket, of: characteristic)
            return
        }
        let limit = maximumWriteLength(for: characteristic, type: type)
        guard value.count <= limit, offset + value.count <= 512 else {
            throw BluetoothError(
                .valueTooLong,
                message:
                    "\(value.count) bytes at offset \(offset) do not fit a \(type.name) of \(characteristic.uuid): "
                    + "at most \(offset > 0 ? 512 - offset : limit) bytes")
        }
        if type != .withoutResponse { await backend.releaseWriteSocket(for: characteristic) }
        try await queue.withLock { [backend] in
            try await backend.write(value, to: characteristic, type: type, offset: offset)
        }
    }

    /// Writes a sequence of values without response, in order, as a firmware update does:
    /// through the characteristic's socket where the backend grants one (see
    /// ``write(_:to:type:offset:)``), each value waiting for room in the socket rather than being
    /// dropped, and without leaving the caller's actor unless it has to wait.
    ///
    /// Through a socket the values go in batches of up to ``writeBatchLength``: the socket's event
    /// loop puts a batch's values into the socket as it makes room, and wakes the caller once per
    /// batch rather than once per value. `progress` is called for a batch's values once the socket
    /// has taken the whole batch: at a link's 1,000 Write Commands a second, about twice a second.
    /// (Waking the caller is what a batch costs: on the host benchmark, writes paced by the link
    /// cost a quarter more CPU per value in batches of 64 than in batches of 512.) For finer
    /// progress, write shorter sequences.
    ///
    /// - Parameters:
    ///   - values: The values, each at most the socket's MTU less 3 bytes (see
    ///     ``maximumWriteLength(for:type:)``).
    ///   - identifier: The characteristic.
    ///   - progress: Called after each value with how many have been written so far.
    /// - Returns: How many values were written.
    /// - Throws: ``BluetoothError/Code/valueTooLong`` at the first value that is too long (the
    ///   values before it are written); ``BluetoothError/Code/disconnected`` when the link or the
    ///   socket ends; `CancellationError` when the task is cancelled (the values of the batch that
    ///   are still waiting for room are then not written).
    ///
    /// The corresponding BlueZ method is `org.bluez.GattCharacteristic1.AcquireWrite`, or
    /// `WriteValue` with `type: command` where BlueZ refuses the socket.
    @discardableResult
    public nonisolated(nonsending) func writeWithoutResponse(
        _ values: some Sequence<[UInt8]>, to identifier: some CharacteristicIdentifier,
        progress: (_ written: Int) -> Void = { _ in }
    ) async throws -> Int {
        let characteristic = try await self.characteristic(identifier)
        var written = 0
        if let socket = try await backend.writeSocket(for: characteristic) {
            // An array's batches are slices of it: no copy, and no retain per value.
            if let values = values as? [[UInt8]] {
                var start = values.startIndex
                while start < values.endIndex {
                    let end = min(start + Self.writeBatchLength, values.endIndex)
                    try await Self.writeBatch(
                        values[start..<end], into: socket, of: characteristic, written: &written, progress: progress)
                    start = end
                }
                return written
            }
            var batch: [[UInt8]] = []
            batch.reserveCapacity(Self.writeBatchLength)
            var iterator = values.makeIterator()
            while true {
                var misfit: BluetoothError?
                batch.removeAll(keepingCapacity: true)
                while batch.count < Self.writeBatchLength, let value = iterator.next() {
                    guard socket.fits(value) else {
                        misfit = Self.misfit(value, socket, characteristic)
                        break
                    }
                    batch.append(value)
                }
                try await Self.writeBatch(
                    batch[...], into: socket, of: characteristic, written: &written, progress: progress)
                // The values before one that does not fit are written; it and those after it are not.
                if let misfit { throw misfit }
                if batch.count < Self.writeBatchLength { return written }
            }
        }
        for value in values {
            try await write(value, to: identifier, type: .withoutResponse)
            written += 1
            progress(written)
        }
        return written
    }

    /// The most values ``writeWithoutResponse(_:to:progress:)`` hands a characteristic's socket at
    /// once, and so how many it writes between two calls of its `progress`.
    public static let writeBatchLength = 512

    private static func send(
        _ value: [UInt8], into socket: AcquiredSocket, of characteristic: RemoteCharacteristic,
        isolation: isolated (any Actor)? = #isolation
    ) async throws {
        guard socket.fits(value) else { throw misfit(value, socket, characteristic) }
        do {
            try await socket.send(value, isolation: isolation)
        } catch let error as BluetoothError where error.code == .notConnected || error.code == .disconnected {
            throw closed(socket: characteristic, cause: error)
        }
    }

    /// Writes one batch into the socket, up to the first value that does not fit it, counting
    /// each value in `written` and reporting it to `progress` once the socket has taken the batch;
    /// then throws for that value, if one did not fit.
    private static func writeBatch(
        _ values: ArraySlice<[UInt8]>, into socket: AcquiredSocket, of characteristic: RemoteCharacteristic,
        written: inout Int, progress: (_ written: Int) -> Void, isolation: isolated (any Actor)? = #isolation
    ) async throws {
        let fitting = values.firstIndex { !socket.fits($0) } ?? values.endIndex
        if fitting > values.startIndex {
            try Task.checkCancellation()
            if !socket.isOpen {
                throw BluetoothError(
                    .disconnected, message: "the write socket of \(characteristic.uuid) closed after \(written) values")
            }
            do {
                try await socket.send(contentsOf: values[..<fitting], isolation: isolation)
            } catch let error as BluetoothError where error.code == .notConnected || error.code == .disconnected {
                throw closed(socket: characteristic, cause: error)
            }
            for _ in values[..<fitting].indices {
                written += 1
                progress(written)
            }
        }
        if fitting < values.endIndex { throw misfit(values[fitting], socket, characteristic) }
    }

    /// The error for a value that does not fit a write without response through `socket`.
    private static func misfit(
        _ value: [UInt8], _ socket: AcquiredSocket, _ characteristic: RemoteCharacteristic
    ) -> BluetoothError {
        BluetoothError(
            value.isEmpty ? .invalidArguments : .valueTooLong,
            message: "\(value.count) bytes do not fit a write without response of \(characteristic.uuid): "
                + "its socket's ATT MTU of \(socket.attMTU) allows 1 to \(socket.maximumValueLength) bytes")
    }

    /// The error for a write into `characteristic`'s socket that closed under it.
    private static func closed(socket characteristic: RemoteCharacteristic, cause: BluetoothError) -> BluetoothError {
        BluetoothError(.disconnected, message: "the write socket of \(characteristic.uuid) was closed", cause: cause)
    }

    /// Reads a descriptor's value.
    ///
    /// The corresponding BlueZ method is `org.bluez.GattDescriptor1.ReadValue`.
    /// - Throws: ``BluetoothError``, with ``BluetoothError/attError`` set when the peripheral
    ///   answered with an ATT error; ``BluetoothError/Code/disconnected`` when the link drops.
    public func read(_ identifier: some DescriptorIdentifier) async throws -> [UInt8] {
        let descriptor = try descriptor(identifier)
        return try await queue.withLock { [backend] in try await backend.read(descriptor) }
    }

    /// Writes a descriptor's value.
    ///
    /// The corresponding BlueZ method is `org.bluez.GattDescriptor1.WriteValue`.
    /// - Throws: ``BluetoothError/Code/valueTooLong`` before sending anything when `value` is
    ///   longer than 512 bytes; ``BluetoothError/Code/disconnected`` when the link drops;
    ///   otherwise what the peripheral answered.
    public func write(_ value: [UInt8], to identifier: some DescriptorIdentifier) async throws {
        let descriptor = try descriptor(identifier)
        try InputChecks.attributeValue(value)
        try await queue.withLock { [backend] in try await backend.write(value, to: descriptor) }
    }

    /// The ATT MTU negotiated for the link, when BlueZ reports it.
    public func mtu(of identifier: some CharacteristicIdentifier) throws -> Int? {
        backend.mtu(of: try characteristic(identifier))
    }

    /// The longest value a write of this type can carry: 512 bytes (the attribute limit) with a
    /// response or reliably; without one, the MTU less the 3-byte ATT header (20 bytes while the
    /// MTU is unknown; an acquired write socket's own MTU once there is one), and at most 512
    /// bytes too, however large the MTU (BlueZ drops a longer Write Command, or cuts it short
    /// when it comes through the socket).
    public func maximumWriteLength(for characteristic: RemoteCharacteristic, type: WriteType = .withResponse) -> Int {
        switch type {
        case .withResponse, .reliable: AcquiredSocket.maximumAttributeValueLength
        case .withoutResponse:
            min((backend.mtu(of: characteristic) ?? 23) - 3, AcquiredSocket.maximumAttributeValueLength)
        }
    }

    /// Subscribes to a characteristic's notifications or indications.
    ///
    /// See ``NotificationStream`` for what is shared, buffered and when it ends. To take exactly
    /// `n` values: `for try await value in try await peripheral.notifications(of: id).prefix(n)`.
    ///
    /// - Parameters:
    ///   - identifier: The characteristic.
    ///   - delivery: How the values come: `PropertiesChanged` on the bus (the default), the
    ///     characteristic's own socket, or the socket where BlueZ grants it; see
    ///     ``NotificationDelivery`` for why the bus is the default. The stream's API, buffering and
    ///     end are the same either way.
    ///
    /// The corresponding BlueZ methods are `org.bluez.GattCharacteristic1.StartNotify` and
    /// `StopNotify`, or `AcquireNotify` (released by closing the socket).
    /// - Throws: ``BluetoothError/Code/notSupported`` when the characteristic neither notifies nor
    ///   indicates, or when ``NotificationDelivery/socket`` is asked of one that only indicates;
    ///   what BlueZ answered to `StartNotify` or `AcquireNotify`.
    public func notifications(
        of identifier: some CharacteristicIdentifier, delivery: NotificationDelivery = .propertiesChanged
    ) async throws -> NotificationStream {
        let characteristic = try characteristic(identifier)
        guard !characteristic.properties.isDisjoint(with: [.notify, .indicate]) else {
            throw BluetoothError(.notSupported, message: "\(characteristic.uuid) neither notifies nor indicates")
        }
        if delivery == .socket, !characteristic.properties.contains(.notify) {
            throw BluetoothError(
                .notSupported,
                message: "\(characteristic.uuid) only indicates: indications are confirmed on the bus, not a socket")
        }
        let (stream, continuation) = NotificationStream.make()
        try await queue.withLock { [backend] in
            try await backend.subscribe(to: characteristic, into: continuation, delivery: delivery)
        }
        return stream
    }
}

extension WriteType {
    var name: String {
        switch self {
        case .withResponse: "write"
        case .withoutResponse: "write without response"
        case .reliable: "reliable write"
        }
    }
}
