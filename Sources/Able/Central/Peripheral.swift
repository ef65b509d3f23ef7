/// A remote device, seen from this adapter: connect to it, use its GATT services, and receive
/// its notifications.
///
/// ```swift
/// let peripheral = await adapter.peripheral(for: discovery)
/// try await peripheral.connect(timeout: .seconds(10))
/// let level = try await peripheral.read(Characteristics.batteryLevel)
/// for try await value in try await peripheral.notifications(of: Characteristics.measurement).prefix(5) { … }
/// try await peripheral.disconnect()
/// ```
///
/// GATT operations on one peripheral run one at a time, in the order they were asked for,
/// since BlueZ answers `InProgress` to overlapping ones. A task cancelled while its operation
/// waits for its turn throws `CancellationError` at once, and nothing of it reaches BlueZ.
///
/// The peripheral keeps no mutable state of its own (its backend follows the connection, and a
/// lock puts the GATT operations in line): it is an actor so that it is shared between tasks as
/// safely as the other public types and its members are awaited like theirs, which they can
/// stay if it gains state.
public actor Peripheral {
    /// Where a connection stands.
    public enum ConnectionState: Sendable, Hashable, CustomStringConvertible {
        /// Not connected. `reason` says why the link ended when the backend knows: BlueZ 5.66
        /// reports no reason over D-Bus, so on BlueZ it is `nil` unless the device itself went
        /// away; a simulated radio gives the reason of the fault that ended the link.
        case disconnected(reason: String?)
        /// Linked, but the services are not resolved yet.
        case connecting
        /// Linked, with the services resolved: GATT operations can go ahead.
        case connected
        /// Being taken down. BlueZ announces no such state, so neither backend reports it today;
        /// handle it like ``disconnected(reason:)`` in a `switch`.
        case disconnecting

        public var description: String {
            switch self {
            case .disconnected(let reason?): "disconnected (\(reason))"
            case .disconnected: "disconnected"
            case .connecting: "connecting"
            case .connected: "connected"
            case .disconnecting: "disconnecting"
            }
        }
    }

    let backend: any PeripheralBackend
    private let queue = FIFOLock()

    /// The peripheral's address.
    public nonisolated let address: BluetoothAddress

    init(backend: any PeripheralBackend) {
        self.backend = backend
        self.address = backend.address
    }

    /// Whether the peripheral is connected now.
    public var isConnected: Bool { backend.isConnected }

    /// Connects and waits until the peripheral's services are resolved.
    ///
    /// - Parameter timeout: How long the whole connection may take, services included.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/timeout`` when `timeout` elapses,
    ///   ``BluetoothError/Code/disconnected`` when the link drops before the services are resolved,
    ///   or what BlueZ answered (for example ``BluetoothError/Code/connectionAttemptFailed`` with
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
    /// Able registers `agent` as BlueZ's default agent while pairing. Cancelling the task
    /// cancels the pairing in BlueZ.
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
    public func services() throws -> [GATTService] {
        try backend.services()
    }

    /// The discovered characteristic a typed identifier names.
    ///
    /// - Throws: ``BluetoothError/Code/doesNotExist`` when the peripheral has no such
    ///   characteristic in that service (or the service is gone).
    public func characteristic(_ identifier: some CharacteristicIdentifier) throws -> GATTCharacteristic {
        let services = try backend.services()
        let serviceUUID = identifier.service.uuid
        guard let service = services.first(where: { $0.uuid == serviceUUID }) else {
            throw BluetoothError(.doesNotExist, message: "\(address) has no service \(serviceUUID)")
        }
        guard let characteristic = service.characteristics.first(where: { $0.uuid == identifier.uuid }) else {
            throw BluetoothError(
                .doesNotExist, message: "service \(serviceUUID) has no characteristic \(identifier.uuid)")
        }
        return characteristic
    }

    /// The discovered descriptor a typed identifier names.
    public func descriptor(_ identifier: some DescriptorIdentifier) throws -> GATTDescriptor {
        let characteristic = try characteristic(identifier.characteristic)
        guard let descriptor = characteristic.descriptors.first(where: { $0.uuid == identifier.uuid }) else {
            throw BluetoothError(.doesNotExist, message: "\(characteristic) has no descriptor \(identifier.uuid)")
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
    /// The corresponding BlueZ method is `org.bluez.GattCharacteristic1.WriteValue`.
    /// - Throws: ``BluetoothError/Code/valueTooLong`` before sending anything when `value` is longer
    ///   than ``maximumWriteLength(for:type:)``; ``BluetoothError/Code/disconnected`` when the
    ///   link drops; otherwise what the peripheral answered.
    public func write(
        _ value: [UInt8], to identifier: some CharacteristicIdentifier, type: WriteType = .withResponse
    ) async throws {
        let characteristic = try characteristic(identifier)
        let limit = maximumWriteLength(for: characteristic, type: type)
        guard value.count <= limit else {
            throw BluetoothError(
                .valueTooLong,
                message:
                    "\(value.count) bytes do not fit a \(type == .withResponse ? "write" : "write without response") "
                    + "of \(characteristic.uuid): at most \(limit) bytes")
        }
        try await queue.withLock { [backend] in try await backend.write(value, to: characteristic, type: type) }
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
    /// response, the MTU less the 3-byte ATT header without one (20 bytes while the MTU is unknown).
    public func maximumWriteLength(for characteristic: GATTCharacteristic, type: WriteType = .withResponse) -> Int {
        switch type {
        case .withResponse: 512
        case .withoutResponse: (backend.mtu(of: characteristic) ?? 23) - 3
        }
    }

    /// Subscribes to a characteristic's notifications or indications.
    ///
    /// See ``NotificationStream`` for what is shared, buffered and when it ends. To take exactly
    /// `n` values: `for try await value in try await peripheral.notifications(of: id).prefix(n)`.
    ///
    /// The corresponding BlueZ methods are `org.bluez.GattCharacteristic1.StartNotify` and `StopNotify`.
    /// - Throws: ``BluetoothError/Code/notSupported`` when the characteristic neither notifies nor
    ///   indicates; what BlueZ answered to `StartNotify`.
    public func notifications(of identifier: some CharacteristicIdentifier) async throws -> NotificationStream {
        let characteristic = try characteristic(identifier)
        guard !characteristic.properties.isDisjoint(with: [.notify, .indicate]) else {
            throw BluetoothError(.notSupported, message: "\(characteristic.uuid) neither notifies nor indicates")
        }
        let (stream, continuation) = NotificationStream.make()
        try await queue.withLock { [backend] in try await backend.subscribe(to: characteristic, into: continuation) }
        return stream
    }
}
