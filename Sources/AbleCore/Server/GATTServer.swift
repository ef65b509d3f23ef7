import AbleIO

/// A local GATT server: the services of a ``GATTServerDefinition``, served through the adapter,
/// with the definition's handlers answering centrals.
///
/// ```swift
/// let psmID = CharacteristicID(psmUUID, service: serviceID)
/// let server = try await GATTServer.start(on: adapter) {
///     Service(serviceID) {
///         Characteristic(psmID, properties: [.read, .indicate])
///     }
///     OnRead(psmID) { _ in psm.bytes }
/// }
/// try await server.indicate(psmID, value: psm.bytes)
/// await server.close()
/// ```
///
/// The server's methods name a characteristic by a ``CharacteristicIdentifier``, which names its
/// service too: two services may hold characteristics of one UUID.
///
/// Handlers are `async` closures that start as soon as BlueZ's request arrives, on the bus
/// connection's event loop, and run there until they first suspend; one declared
/// `answering: .immediately` cannot suspend and is answered with no task and no thread switch at
/// all (see ``OnRead``). So a handler must not block (no sleeping, no synchronous I/O) before its
/// first `await`: that would hold up the connection.
///
/// Notifications are paced per central (see ``NotificationPacing``): ``notify(_:value:)`` suspends
/// while a subscribed central has had its share, so a server notifying in a tight loop keeps
/// answering requests, and nothing is dropped or queued without bound.
///
/// The server outlives the Bluetooth stack under it. When `bluetoothd` stops or restarts (a
/// distribution upgrade, a crash) or the adapter is removed, BlueZ forgets the registration and
/// every central's link goes; the server stays open, reports the gap to ``OnServingChange``
/// (``isServing`` is `false` meanwhile), and when the adapter is back it registers again by
/// itself and reports that too. Centrals then connect and subscribe again as they would after
/// any link loss. A months-long gateway needs nothing more than the server object it started.
///
/// - Important: Close the server when done (or use ``Adapter/withGATTServer(_:pacing:isolation:_:)``); BlueZ
///   keeps serving a registered application until it is unregistered or this process exits.
public actor GATTServer {
    private enum State {
        case open
        case closed
    }

    let core: GATTServerCore
    package let backend: any GATTServerBackend
    private var state = State.open
    /// Whether the backend has the server registered now (see ``isServing``).
    private let serving = Lock(true)
    /// Who is subscribed to each characteristic, as the backend reports it: named centrals, and
    /// ``PacingKey/unnamed`` for subscribers the backend cannot name.
    private let subscriptions = Lock<[AttributeID: Set<PacingKey>]>([:])
    private let pacer: NotificationPacer
    private var eventTask: Task<Void, Never>?
    private var eventContinuation: AsyncStream<Event>.Continuation?

    init(core: GATTServerCore, backend: any GATTServerBackend, pacing: NotificationPacing) {
        self.core = core
        self.backend = backend
        self.pacer = NotificationPacer(pacing: pacing)
    }

    /// Starts a server on `adapter` from a definition written in the builder block.
    ///
    /// The corresponding BlueZ method is `org.bluez.GattManager1.RegisterApplication`.
    /// - Parameters:
    ///   - adapter: The adapter to serve on.
    ///   - pacing: How fast notifications go to each central; ``NotificationPacing/default``
    ///     (20 per second per central) unless the links are known to be faster.
    ///   - content: The services and handlers.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/invalidArguments`` for a definition that
    ///   ``GATTServerDefinition/validate()`` rejects or a pacing below 1, or what BlueZ answered.
    public static func start(
        on adapter: Adapter, pacing: NotificationPacing = .default,
        @GATTServerBuilder _ content: () -> [any GATTServerComponent]
    ) async throws -> GATTServer {
        try await start(on: adapter, pacing: pacing, definition: GATTServerDefinition(content))
    }

    /// Starts a server on `adapter` from a stored definition.
    ///
    /// The corresponding BlueZ method is `org.bluez.GattManager1.RegisterApplication`.
    /// - Parameters:
    ///   - adapter: The adapter to serve on.
    ///   - pacing: How fast notifications go to each central; ``NotificationPacing/default``
    ///     (20 per second per central) unless the links are known to be faster.
    ///   - definition: The services and handlers.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/invalidArguments`` for a definition that
    ///   ``GATTServerDefinition/validate()`` rejects or a pacing below 1, or what BlueZ answered.
    public static func start(
        on adapter: Adapter, pacing: NotificationPacing = .default, definition: GATTServerDefinition
    ) async throws -> GATTServer {
        try definition.validate()
        try pacing.validate()
        let core = GATTServerCore(definition: definition)
        let server = GATTServer(
            core: core, backend: try await adapter.backend.gattServerBackend(), pacing: pacing)
        try await server.open()
        return server
    }

    private enum Event: Sendable {
        case connection(CentralConnectionChange)
        case subscription(Central?, BluetoothUUID, Bool)
        case serving(ServingChange)
    }

    private func open() async throws {
        let definition = core.definition
        let core = self.core
        let subscriptions = self.subscriptions
        // Events reach the handlers in order, from one task that lives as long as the server.
        let (events, continuation) = AsyncStream<Event>.makeStream()
        let backendEvents = GATTServerEvents(
            connectionChanged: { change in continuation.yield(.connection(change)) },
            subscriptionChanged: { central, id, isSubscribed in
                subscriptions.withLock { subscriptions in
                    if isSubscribed {
                        subscriptions[id, default: []].insert(PacingKey(central))
                    } else {
                        subscriptions[id]?.remove(PacingKey(central))
                    }
                }
                continuation.yield(.subscription(central, core.characteristic(id).uuid, isSubscribed))
            },
            servingChanged: { [serving] change in
                serving.withLock { $0 = change.isServing }
                continuation.yield(.serving(change))
            })
        eventTask = Task.inheritingExecutor { [weak self] in
            for await event in events {
                guard let self else { return }
                switch event {
                case .connection(let change):
                    for handler in definition.connectionHandlers { await handler(self, change) }
                case .subscription(let central, let uuid, let isSubscribed):
                    for handler in definition.subscriptionHandlers { await handler(self, central, uuid, isSubscribed) }
                case .serving(let change):
                    for handler in definition.servingHandlers { await handler(self, change) }
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

    /// Whether the server is still open: not closed by ``close()``. It stays open through a gap
    /// in the Bluetooth stack (see ``isServing``).
    public var isOpen: Bool { state == .open }

    /// Whether the server serves now: open, and registered with the stack. `false` while
    /// `bluetoothd` is away (or the adapter removed) and until the server has registered again
    /// after it came back; ``OnServingChange`` reports each change.
    public var isServing: Bool { state == .open && serving.withLock { $0 } }

    /// The centrals connected to the adapter now.
    public var connectedCentrals: [Central] { backend.connectedCentrals }

    /// Whether any central is subscribed to the characteristic now.
    ///
    /// - Parameter identifier: The characteristic, with its service: two services may hold
    ///   characteristics of the same UUID.
    /// - Returns: `true` when a central is subscribed to its notifications or indications; `false`
    ///   also when the server has no such characteristic.
    public func isSubscribed(_ identifier: some CharacteristicIdentifier) -> Bool {
        guard let id = core.characteristic(identifier.uuid, service: identifier.service.uuid) else { return false }
        return subscriptions.withLock { $0[id]?.isEmpty == false }
    }

    /// The centrals subscribed to the characteristic now that the backend can name, sorted by
    /// address.
    ///
    /// The simulator names every subscriber. BlueZ names the centrals subscribed to a
    /// characteristic that notifies and does not indicate from 5.69 on (and to one that
    /// indicates and does not notify from 5.80 on), asking the server for a socket per central;
    /// elsewhere it tells that there are subscribers but not who, so the list is empty while
    /// ``isSubscribed(_:)`` is true.
    ///
    /// - Parameter identifier: The characteristic, with its service.
    /// - Returns: The named subscribers; empty also when the server has no such characteristic.
    public func subscribers(of identifier: some CharacteristicIdentifier) -> [Central] {
        guard let id = core.characteristic(identifier.uuid, service: identifier.service.uuid) else { return [] }
        return Self.named(subscriptions.withLock { $0[id] ?? [] })
    }

    /// The centrals among `keys`, sorted by address.
    private static func named(_ keys: Set<PacingKey>) -> [Central] {
        keys.compactMap { key -> Central? in
            if case .central(let address) = key { return Central(address: address) }
            return nil
        }.sorted { $0.address < $1.address }
    }

    /// The value a characteristic stores now.
    ///
    /// - Parameter identifier: The characteristic, with its service.
    /// - Returns: The stored value, or `nil` when the server has no such characteristic.
    public func value(of identifier: some CharacteristicIdentifier) -> [UInt8]? {
        core.characteristic(identifier.uuid, service: identifier.service.uuid).map(core.storedValue)
    }

    /// The value a descriptor stores now.
    ///
    /// - Parameter identifier: The descriptor, with its characteristic and service.
    /// - Returns: The stored value, or `nil` when the server has no such descriptor.
    public func value(of identifier: some DescriptorIdentifier) -> [UInt8]? {
        descriptorID(identifier).map(core.storedValue)
    }

    /// Sets the value a characteristic serves, without telling anyone.
    ///
    /// - Parameters:
    ///   - value: The new value, at most 512 bytes.
    ///   - identifier: The characteristic, with its service.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/valueTooLong`` for a value over 512
    ///   bytes; ``BluetoothError/Code/doesNotExist`` when the server has no such characteristic.
    public func setValue(_ value: [UInt8], of identifier: some CharacteristicIdentifier) throws {
        try InputChecks.attributeValue(value)
        core.store(value, for: try characteristicID(identifier))
    }

    /// Sets the value a descriptor serves, without telling anyone.
    ///
    /// - Parameters:
    ///   - value: The new value, at most 512 bytes.
    ///   - identifier: The descriptor, with its characteristic and service.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/valueTooLong`` for a value over 512
    ///   bytes; ``BluetoothError/Code/doesNotExist`` when the server has no such descriptor.
    public func setValue(_ value: [UInt8], of identifier: some DescriptorIdentifier) throws {
        try InputChecks.attributeValue(value)
        guard let id = descriptorID(identifier) else {
            throw BluetoothError(
                .doesNotExist,
                message: "the server has no descriptor \(identifier.uuid) in characteristic "
                    + "\(identifier.characteristic.uuid) of service \(identifier.characteristic.service.uuid)")
        }
        core.store(value, for: id)
    }

    /// The longest value a notification or indication can carry to a central: its link's ATT
    /// MTU less the 3-byte header of the ATT PDU, and at most 512 bytes (the longest attribute
    /// value).
    ///
    /// The simulator knows it for every connected central (see `SimulatedRadio.makeAdapter`).
    /// BlueZ publishes no link's MTU to a server (`org.bluez.Device1` has no such property); it
    /// passes it, as the `mtu` option from BlueZ 5.51 on, with each request it makes to the
    /// server's application: `ReadValue` and `WriteValue` of the server's characteristics and
    /// descriptors, and `AcquireNotify`, the subscription to a characteristic that notifies and
    /// does not indicate (from 5.80 also one that indicates and does not notify). So on BlueZ it
    /// is known once the central has read, written or so subscribed since it connected, and it is
    /// the MTU of the latest such request. A subscription through `StartNotify` (a characteristic
    /// that both notifies and indicates, or before 5.80 one that only indicates) carries no
    /// options and tells nothing.
    ///
    /// - Parameter central: A connected central.
    /// - Returns: The length in bytes, or `nil` when `central` is not connected or its MTU is not
    ///   known yet.
    public func maximumValueLength(for central: Central) -> Int? {
        backend.attMTU(of: central).map { min($0 - 3, InputChecks.maximumAttributeLength) }
    }

    /// Sets a characteristic's value and notifies every subscribed central.
    ///
    /// Paced by the server's ``NotificationPacing``: this waits until every subscribed central
    /// has a token, then hands the value over, waiting while the way to BlueZ is full. It never
    /// drops a value and never queues one without bound; values notified one after another from
    /// one task arrive in that order.
    ///
    /// A value is never cut short. One longer than a subscribed central can receive (see
    /// ``maximumValueLength(for:)``) is refused as a whole, for every subscriber: nothing is
    /// stored or sent, so that every subscriber sees the same sequence of values. Send shorter
    /// values, or notify the centrals that can take it one by one with
    /// ``notify(_:value:to:)``. A subscriber whose maximum is not known (on BlueZ, one of a
    /// characteristic that also indicates, or any before 5.69, which names no subscriber of a
    /// socket) limits nothing here; on BlueZ before 5.69 the socket's own MTU (the first
    /// subscriber's) is checked instead. To such a subscriber `bluetoothd` sends what its link
    /// carries, the first ATT MTU − 3 bytes.
    ///
    /// The corresponding BlueZ mechanism is the socket BlueZ acquires with the server's
    /// `org.bluez.GattCharacteristic1.AcquireNotify` (one per central from BlueZ 5.69), or
    /// `PropertiesChanged` of the characteristic's `Value` where there is none (a characteristic
    /// that also indicates).
    /// - Parameters:
    ///   - identifier: The characteristic, with its service.
    ///   - value: The new value.
    /// - Throws: ``BluetoothError``: ``BluetoothError/Code/notSupported`` when the characteristic
    ///   does not notify; ``BluetoothError/Code/doesNotExist`` when the server has no such
    ///   characteristic; ``BluetoothError/Code/notAvailable`` when the server is closed;
    ///   ``BluetoothError/Code/valueTooLong`` for a value over 512 bytes, or longer than a
    ///   subscriber can receive (the message names each such central, its maximum and the
    ///   value's length), before sending anything; `CancellationError` when the task is
    ///   cancelled while it waits for its turn.
    public func notify(_ identifier: some CharacteristicIdentifier, value: [UInt8]) async throws {
        try await send(value, of: identifier, to: nil, property: .notify)
    }

    /// Sets a characteristic's value and notifies one central, if it is subscribed.
    ///
    /// Paced like ``notify(_:value:)``, by that central's tokens only. Nothing is sent when the
    /// central is not subscribed (it may have just left). A value longer than the central can
    /// receive (see ``maximumValueLength(for:)``) is refused, not cut short.
    ///
    /// The corresponding BlueZ mechanism is the central's own socket from the server's
    /// `org.bluez.GattCharacteristic1.AcquireNotify`.
    /// - Important: BlueZ 5.76 is the first that sends what a server writes into a central's
    ///   socket to that central only (5.69 to 5.75 send it to every subscriber; older ones have
    ///   one socket for all), and only for a characteristic that notifies and does not also
    ///   indicate. Elsewhere this throws ``BluetoothError/Code/unsupported`` rather than notify
    ///   every subscriber.
    /// - Parameters:
    ///   - identifier: The characteristic, with its service.
    ///   - value: The new value.
    ///   - central: The central to notify.
    /// - Throws: ``BluetoothError``: as ``notify(_:value:)`` does;
    ///   ``BluetoothError/Code/valueTooLong`` naming both lengths when `value` is longer than
    ///   `central` can receive, before sending anything; ``BluetoothError/Code/unsupported``
    ///   where BlueZ cannot notify one central.
    public func notify(_ identifier: some CharacteristicIdentifier, value: [UInt8], to central: Central) async throws {
        try await send(value, of: identifier, to: central, property: .notify)
    }

    /// Sets a characteristic's value, indicates it to subscribed centrals, and returns once every
    /// one of them confirmed it.
    ///
    /// Indications are paced by their confirmations, not by the server's ``NotificationPacing``:
    /// the next one goes after this returns. A value longer than a subscriber can receive is
    /// refused as a whole, as ``notify(_:value:)`` refuses it.
    ///
    /// The corresponding BlueZ mechanism is the socket BlueZ acquires per central with the
    /// server's `org.bluez.GattCharacteristic1.AcquireNotify`, confirmed through it, from BlueZ
    /// 5.80 and for a characteristic that indicates and does not notify. Elsewhere it is
    /// `PropertiesChanged` of the characteristic's `Value`, and BlueZ's `Confirm` does not say
    /// which central confirmed: this then returns on the first confirmation.
    /// - Parameters:
    ///   - identifier: The characteristic, with its service.
    ///   - value: The new value.
    ///   - timeout: How long to wait for the confirmations.
    /// - Throws: ``BluetoothError/Code/timeout`` naming the centrals that did not confirm within
    ///   `timeout`; ``BluetoothError/Code/disconnected`` naming those that left before confirming
    ///   (it does not hang on them); ``BluetoothError/Code/invalidArguments`` for a negative
    ///   `timeout` and ``BluetoothError/Code/valueTooLong`` for a value over 512 bytes or longer
    ///   than a subscriber can receive, before sending anything; otherwise as
    ///   ``notify(_:value:)`` does.
    public func indicate(
        _ identifier: some CharacteristicIdentifier, value: [UInt8], timeout: Duration = .seconds(30)
    ) async throws {
        try InputChecks.timeout(timeout, of: "an indication")
        try await send(value, of: identifier, to: nil, property: .indicate, timeout: timeout)
    }

    /// Sets a characteristic's value, indicates it to one central if it is subscribed, and
    /// returns once that central confirmed it.
    ///
    /// - Important: BlueZ 5.80 is the first that confirms an indication per central (through
    ///   the central's socket from the server's `AcquireNotify`), and only for a characteristic
    ///   that indicates and does not notify. Elsewhere this throws
    ///   ``BluetoothError/Code/unsupported`` rather than indicate every subscriber.
    /// - Parameters:
    ///   - identifier: The characteristic, with its service.
    ///   - value: The new value.
    ///   - central: The central to indicate.
    ///   - timeout: How long to wait for the confirmation.
    /// - Throws: As ``indicate(_:value:timeout:)`` does; ``BluetoothError/Code/valueTooLong``
    ///   naming both lengths when `value` is longer than `central` can receive, before sending
    ///   anything; ``BluetoothError/Code/unsupported`` where BlueZ cannot indicate one central.
    public func indicate(
        _ identifier: some CharacteristicIdentifier, value: [UInt8], to central: Central,
        timeout: Duration = .seconds(30)
    ) async throws {
        try InputChecks.timeout(timeout, of: "an indication")
        try await send(value, of: identifier, to: central, property: .indicate, timeout: timeout)
    }

    private func send(
        _ value: [UInt8], of identifier: some CharacteristicIdentifier, to central: Central?,
        property: CharacteristicProperties, timeout: Duration = .seconds(30)
    ) async throws {
        guard state == .open else { throw BluetoothError(.notAvailable, message: "the GATT server is closed") }
        try InputChecks.attributeValue(value)
        let id = try characteristicID(identifier)
        let verb = property == .notify ? "notify" : "indicate"
        guard core.characteristic(id).properties.contains(property) else {
            throw BluetoothError(.notSupported, message: "\(identifier.uuid) does not \(verb)")
        }
        try checkLength(value, of: identifier, id, to: central, verb)
        if property == .notify {
            let subscribers = subscriptions.withLock { $0[id] ?? [] }
            let keys = central.map { [PacingKey($0)] } ?? Array(subscribers)
            try await pacer.wait(for: Set(keys), backend: backend)
            guard state == .open else {
                throw BluetoothError(.notAvailable, message: "the GATT server was closed")
            }
            // A central may have subscribed while this waited.
            try checkLength(value, of: identifier, id, to: central, verb)
        }
        core.store(value, for: id)
        try await backend.send(value, of: id, to: central, indicate: property == .indicate, timeout: timeout)
    }

    /// Refuses a value longer than `central` (or, for `nil`, a subscriber of `id`) can receive.
    private func checkLength(
        _ value: [UInt8], of identifier: some CharacteristicIdentifier, _ id: AttributeID, to central: Central?,
        _ verb: String
    ) throws {
        // Every link carries this much: its ATT MTU is at least 23.
        guard value.count > 20 else { return }
        let targets = central.map { [$0] } ?? Self.named(subscriptions.withLock { $0[id] ?? [] })
        var misfits = targets.compactMap { central -> String? in
            guard let limit = maximumValueLength(for: central), value.count > limit else { return nil }
            return "\(central) can receive \(limit)"
        }
        if central == nil, let limit = backend.unnamedSubscribersMaximumValueLength(of: id), value.count > limit {
            misfits.append("every subscriber can receive \(limit)")
        }
        guard !misfits.isEmpty else { return }
        throw BluetoothError(
            .valueTooLong,
            message: "cannot \(verb) \(value.count) bytes of \(identifier.uuid): "
                + misfits.joined(separator: ", ") + " (ATT MTU less 3)"
                + (central == nil ? "; nothing was sent to any subscriber" : ""))
    }

    private func characteristicID(_ identifier: some CharacteristicIdentifier) throws -> AttributeID {
        guard let id = core.characteristic(identifier.uuid, service: identifier.service.uuid) else {
            throw BluetoothError(
                .doesNotExist,
                message: "the server has no characteristic \(identifier.uuid) in service \(identifier.service.uuid)")
        }
        return id
    }

    private func descriptorID(_ identifier: some DescriptorIdentifier) -> AttributeID? {
        let characteristic = identifier.characteristic
        return core.characteristic(characteristic.uuid, service: characteristic.service.uuid).flatMap {
            core.descriptor(identifier.uuid, of: $0)
        }
    }

    /// Disconnects a central.
    ///
    /// Requests of the central whose handlers are still running are answered first, with
    /// ``ATTError/unlikelyError``, and their handlers' tasks are cancelled; what those handlers
    /// return afterwards is dropped. The central sees its requests fail as the link drops.
    ///
    /// The corresponding BlueZ method is `org.bluez.Device1.Disconnect`.
    public func disconnect(_ central: Central) async throws {
        core.abandonRequests(of: central)
        try await backend.disconnect(central)
    }

    /// Stops serving: unregisters from BlueZ and removes every exported object. With
    /// ``AutoManageDevices``, connected centrals are disconnected first.
    public func close() async {
        guard state == .open else { return }
        state = .closed
        if core.definition.managesDevicesAutomatically {
            for central in backend.connectedCentrals { try? await disconnect(central) }
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
    ///   - pacing: How fast notifications go to each central (see ``NotificationPacing``).
    ///   - isolation: Where `body` runs; the caller's actor by default.
    ///   - body: What to do while the server serves.
    /// - Returns: What `body` returned.
    /// - Throws: What starting the server (see ``GATTServer/start(on:pacing:definition:)``) or `body` throws.
    public func withGATTServer<T>(
        _ definition: GATTServerDefinition, pacing: NotificationPacing = .default,
        isolation: isolated (any Actor)? = #isolation, _ body: (GATTServer) async throws -> sending T
    ) async throws -> sending T {
        let server = try await GATTServer.start(on: self, pacing: pacing, definition: definition)
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
