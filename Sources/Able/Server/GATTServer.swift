import AbleStreams

/// A local GATT server: the services of a ``GATTServerDefinition``, served through the adapter,
/// with the definition's handlers answering centrals.
///
/// ```swift
/// let server = try await GATTServer.start(on: adapter) {
///     Service(serviceID) {
///         Characteristic(psmID, properties: [.read, .indicate])
///     }
///     OnRead([psmID]) { _ in psm.bytes }
/// }
/// try await server.notify(psmID, value: psm.bytes)
/// await server.close()
/// ```
///
/// Handlers are `async` closures that start as soon as BlueZ's request arrives, on the bus
/// connection's event loop, and run there until they first suspend; a handler that answers without
/// suspending is answered with no thread switch at all. So a handler must not block (no sleeping,
/// no synchronous I/O) before its first `await`: that would hold up the connection.
///
/// - Important: Close the server when done (or use ``Adapter/withGATTServer(_:isolation:_:)``); BlueZ
///   keeps serving a registered application until it is unregistered or this process exits.
public actor GATTServer {
    private enum State {
        case open
        case closed
    }

    let core: GATTServerCore
    package let backend: any GATTServerBackend
    private var state = State.open
    /// Which characteristics have subscribers, as the backend reports it.
    private let subscriptions = Lock<[AttributeID: Bool]>([:])
    private var eventTask: Task<Void, Never>?
    private var eventContinuation: AsyncStream<Event>.Continuation?

    init(core: GATTServerCore, backend: any GATTServerBackend) {
        self.core = core
        self.backend = backend
    }

    /// Starts a server on `adapter` from a definition written in the builder block.
    ///
    /// The corresponding BlueZ method is `org.bluez.GattManager1.RegisterApplication`.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/invalidArguments`` for a definition that
    ///   ``GATTServerDefinition/validate()`` rejects, or what BlueZ answered.
    public static func start(
        on adapter: Adapter, @GATTServerBuilder _ content: () -> [any GATTServerComponent]
    ) async throws -> GATTServer {
        try await start(on: adapter, definition: GATTServerDefinition(content))
    }

    /// Starts a server on `adapter` from a stored definition.
    public static func start(on adapter: Adapter, definition: GATTServerDefinition) async throws -> GATTServer {
        try definition.validate()
        let core = GATTServerCore(definition: definition)
        let server = GATTServer(core: core, backend: try await adapter.backend.gattServerBackend())
        try await server.open()
        return server
    }

    private enum Event: Sendable {
        case connection(Central, Bool)
        case subscription(Central?, BluetoothUUID, Bool)
    }

    private func open() async throws {
        let definition = core.definition
        let core = self.core
        let subscriptions = self.subscriptions
        // Events reach the handlers in order, from one task that lives as long as the server.
        let (events, continuation) = AsyncStream<Event>.makeStream()
        let backendEvents = GATTServerEvents(
            connectionChanged: { central, isConnected in continuation.yield(.connection(central, isConnected)) },
            subscriptionChanged: { central, id, isSubscribed in
                subscriptions.withLock { $0[id] = isSubscribed }
                continuation.yield(.subscription(central, core.characteristic(id).uuid, isSubscribed))
            })
        eventTask = Task.inheritingExecutor { [weak self] in
            for await event in events {
                guard let self else { return }
                switch event {
                case .connection(let central, let isConnected):
                    for handler in definition.connectionHandlers { await handler(self, central, isConnected) }
                case .subscription(let central, let uuid, let isSubscribed):
                    for handler in definition.subscriptionHandlers { await handler(self, central, uuid, isSubscribed) }
                }
            }
        }
        eventContinuation = continuation
        do {
            try await backend.open(core, events: backendEvents)
        } catch {
            continuation.finish()
            throw error
        }
        for handler in definition.stateHandlers { await handler(self, true) }
    }

    /// Whether the server is still serving.
    public var isOpen: Bool { state == .open }

    /// The centrals connected to the adapter now.
    public var connectedCentrals: [Central] { backend.connectedCentrals }

    /// Whether any central is subscribed to the characteristic now.
    ///
    /// BlueZ tells servers that a characteristic has subscribers, not which centrals they are.
    public func isSubscribed(_ uuid: BluetoothUUID) -> Bool {
        let ids = core.characteristics(uuid)
        return subscriptions.withLock { subscriptions in ids.contains { subscriptions[$0] == true } }
    }

    /// The value a characteristic stores now.
    public func value(of uuid: BluetoothUUID) -> [UInt8]? {
        core.characteristics(uuid).first.map(core.storedValue)
    }

    /// Sets the value a characteristic serves, without telling anyone.
    ///
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/valueTooLong`` for a value over 512
    ///   bytes; ``BluetoothError/Code/doesNotExist`` when the server has no such characteristic.
    public func setValue(_ value: [UInt8], of uuid: BluetoothUUID) throws {
        try InputChecks.attributeValue(value)
        for id in try characteristics(uuid) { core.store(value, for: id) }
    }

    /// Sets a characteristic's value and notifies every subscribed central.
    ///
    /// The corresponding BlueZ mechanism is `PropertiesChanged` of the characteristic's `Value`.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/notSupported`` when the characteristic
    ///   does not notify; ``BluetoothError/Code/notAvailable`` when the server is closed;
    ///   ``BluetoothError/Code/valueTooLong`` for a value over 512 bytes, before sending anything.
    public func notify(_ uuid: BluetoothUUID, value: [UInt8]) async throws {
        try await send(value, of: uuid, property: .notify)
    }

    /// Sets a characteristic's value, indicates it to subscribed centrals, and returns once a
    /// central confirmed it.
    ///
    /// - Throws: ``BluetoothError/Code/timeout`` when no confirmation comes within `timeout`;
    ///   ``BluetoothError/Code/invalidArguments`` for a negative `timeout` and
    ///   ``BluetoothError/Code/valueTooLong`` for a value over 512 bytes, before sending anything.
    public func indicate(_ uuid: BluetoothUUID, value: [UInt8], timeout: Duration = .seconds(30)) async throws {
        try InputChecks.timeout(timeout, of: "an indication")
        try await send(value, of: uuid, property: .indicate, timeout: timeout)
    }

    /// Notifies through a typed identifier.
    public func notify(_ identifier: some CharacteristicIdentifier, value: [UInt8]) async throws {
        try await notify(identifier.uuid, value: value)
    }

    /// Indicates through a typed identifier.
    public func indicate(
        _ identifier: some CharacteristicIdentifier, value: [UInt8], timeout: Duration = .seconds(30)
    ) async throws {
        try await indicate(identifier.uuid, value: value, timeout: timeout)
    }

    private func send(
        _ value: [UInt8], of uuid: BluetoothUUID, property: CharacteristicProperties, timeout: Duration = .seconds(30)
    ) async throws {
        guard state == .open else { throw BluetoothError(.notAvailable, message: "the GATT server is closed") }
        try InputChecks.attributeValue(value)
        for id in try characteristics(uuid) {
            guard core.characteristic(id).properties.contains(property) else {
                throw BluetoothError(
                    .notSupported, message: "\(uuid) does not \(property == .notify ? "notify" : "indicate")")
            }
            core.store(value, for: id)
            try await backend.send(value, of: id, indicate: property == .indicate, timeout: timeout)
        }
    }

    private func characteristics(_ uuid: BluetoothUUID) throws -> [AttributeID] {
        let ids = core.characteristics(uuid)
        guard !ids.isEmpty else {
            throw BluetoothError(.doesNotExist, message: "the server has no characteristic \(uuid)")
        }
        return ids
    }

    /// Disconnects a central.
    ///
    /// The corresponding BlueZ method is `org.bluez.Device1.Disconnect`.
    public func disconnect(_ central: Central) async throws {
        try await backend.disconnect(central)
    }

    /// Stops serving: unregisters from BlueZ and removes every exported object. With
    /// ``AutoManageDevices``, connected centrals are disconnected first.
    public func close() async {
        guard state == .open else { return }
        state = .closed
        if core.definition.managesDevicesAutomatically {
            for central in backend.connectedCentrals { try? await backend.disconnect(central) }
        }
        await backend.close()
        eventContinuation?.finish()
        for handler in core.definition.stateHandlers { await handler(self, false) }
    }
}

extension Adapter {
    /// Runs `body` with a GATT server started from `definition`, and closes it afterwards,
    /// whatever `body` does.
    ///
    /// `body` runs where the caller is (on the main actor when called from there, on a test's
    /// actor in a test), not on the adapter, so it can use the caller's state without `await`
    /// and return what is not `Sendable`.
    ///
    /// - Parameters:
    ///   - definition: The server's services and handlers.
    ///   - isolation: Where `body` runs; the caller's actor by default.
    ///   - body: What to do while the server serves.
    /// - Returns: What `body` returned.
    /// - Throws: What starting the server (see ``GATTServer/start(on:definition:)``) or `body` throws.
    public func withGATTServer<T>(
        _ definition: GATTServerDefinition, isolation: isolated (any Actor)? = #isolation,
        _ body: (GATTServer) async throws -> sending T
    ) async throws -> sending T {
        let server = try await GATTServer.start(on: self, definition: definition)
        do {
            let result = try await body(server)
            await server.close()
            return result
        } catch {
            await server.close()
            throw error
        }
    }
}
