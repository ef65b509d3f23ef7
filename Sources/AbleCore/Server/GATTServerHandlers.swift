/// Answers reads of the selected characteristics or descriptors with the value returned; throw an
/// ``ATTError`` to answer with that error.
///
/// ```swift
/// OnRead(Characteristics.temperature) { request in
///     try await sensor.temperature()
/// }
/// OnRead(Characteristics.psm, answering: .immediately) { request in listener.psm.bytes }
/// OnRead(.anyDescriptor) { request in Array(request.storedValue.dropFirst(request.offset)) }
/// ```
///
/// A handler answers in one of two ways, chosen by how it is declared, never by its body:
/// - Without `answering:` (``GATTServerDefinition/ReadHandler``) it runs in a task of its own,
///   which starts on the thread the request arrived on and runs there until the handler first
///   suspends, and it may `await`. A request that names its central is answered with
///   ``ATTError/unlikelyError``, and its task cancelled, if the server disconnects that central
///   first (``GATTServer/disconnect(_:)``).
/// - With `answering: .immediately` (``GATTServerDefinition/ImmediateReadHandler``) it is called
///   as the request arrives (on BlueZ, on the thread that reads the D-Bus connection), and its
///   answer goes out at once: no task is made and no thread is woken, the cheapest way to serve a
///   read. It cannot `await` (a body that does is a compile-time error), must return quickly and
///   never block, and must not rely on the task it is called in: on BlueZ there is none, so it
///   sees no task-local values.
///
/// Which handler answers an attribute (the same rules hold for ``OnWrite``):
/// 1. the one that names it: a characteristic through its ``CharacteristicIdentifier``, a
///    descriptor through its ``DescriptorIdentifier`` (which names its characteristic too: a
///    descriptor of the same UUID in another characteristic is not covered);
/// 2. otherwise the one for ``AttributeSelection/anyCharacteristic`` (for a characteristic) or
///    ``AttributeSelection/anyDescriptor`` (for a descriptor), whatever the order of declaration;
/// 3. otherwise none, and the server serves the stored value.
///
/// Naming an attribute in two `OnRead`s, or declaring two `OnRead(.anyCharacteristic)`s, is a
/// mistake that ``GATTServerDefinition/validate()`` reports, as is naming one that the definition
/// does not declare where the identifier says.
public struct OnRead: GATTServerComponent {
    let selection: AttributeSelection
    let handler: StoredReadHandler

    /// Answers reads of the characteristics named with `handler`'s value, in a task of the
    /// request's own; `handler` may suspend.
    ///
    /// - Parameters:
    ///   - characteristic: A characteristic to answer for.
    ///   - others: More characteristics to answer for.
    ///   - handler: Returns the value read, or throws an ``ATTError``.
    public init(
        _ characteristic: any CharacteristicIdentifier, _ others: any CharacteristicIdentifier...,
        handler: @escaping GATTServerDefinition.ReadHandler
    ) {
        self.init(.characteristics([characteristic] + others), handler: handler)
    }

    /// Answers reads of the characteristics named with `handler`'s value, at once and without a
    /// task.
    ///
    /// - Parameters:
    ///   - characteristic: A characteristic to answer for.
    ///   - others: More characteristics to answer for.
    ///   - answering: ``GATTServerDefinition/Answering/immediately``.
    ///   - handler: Returns the value read, or throws an ``ATTError``, without suspending.
    public init(
        _ characteristic: any CharacteristicIdentifier, _ others: any CharacteristicIdentifier...,
        answering: GATTServerDefinition.Answering, handler: @escaping GATTServerDefinition.ImmediateReadHandler
    ) {
        self.init(.characteristics([characteristic] + others), answering: answering, handler: handler)
    }

    /// Answers reads of the descriptors named with `handler`'s value, in a task of the request's
    /// own; `handler` may suspend.
    ///
    /// - Parameters:
    ///   - descriptor: A descriptor to answer for, of the characteristic it names.
    ///   - others: More descriptors to answer for.
    ///   - handler: Returns the value read, or throws an ``ATTError``.
    public init(
        _ descriptor: any DescriptorIdentifier, _ others: any DescriptorIdentifier...,
        handler: @escaping GATTServerDefinition.ReadHandler
    ) {
        self.init(.descriptors([descriptor] + others), handler: handler)
    }

    /// Answers reads of the descriptors named with `handler`'s value, at once and without a task.
    ///
    /// - Parameters:
    ///   - descriptor: A descriptor to answer for, of the characteristic it names.
    ///   - others: More descriptors to answer for.
    ///   - answering: ``GATTServerDefinition/Answering/immediately``.
    ///   - handler: Returns the value read, or throws an ``ATTError``, without suspending.
    public init(
        _ descriptor: any DescriptorIdentifier, _ others: any DescriptorIdentifier...,
        answering: GATTServerDefinition.Answering, handler: @escaping GATTServerDefinition.ImmediateReadHandler
    ) {
        self.init(.descriptors([descriptor] + others), answering: answering, handler: handler)
    }

    /// Answers reads of the attributes `selection` selects with `handler`'s value, in a task of the
    /// request's own; `handler` may suspend.
    ///
    /// - Parameters:
    ///   - selection: The attributes to answer for, such as ``AttributeSelection/anyCharacteristic``.
    ///   - handler: Returns the value read, or throws an ``ATTError``.
    public init(_ selection: AttributeSelection, handler: @escaping GATTServerDefinition.ReadHandler) {
        self.selection = selection
        self.handler = StoredReadHandler(inTask: handler)
    }

    /// Answers reads of the attributes `selection` selects with `handler`'s value, at once and
    /// without a task.
    ///
    /// - Parameters:
    ///   - selection: The attributes to answer for, such as ``AttributeSelection/anyCharacteristic``.
    ///   - answering: ``GATTServerDefinition/Answering/immediately``.
    ///   - handler: Returns the value read, or throws an ``ATTError``, without suspending.
    public init(
        _ selection: AttributeSelection, answering: GATTServerDefinition.Answering,
        handler: @escaping GATTServerDefinition.ImmediateReadHandler
    ) {
        self.selection = selection
        self.handler = StoredReadHandler(immediate: handler)
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(handler, for: selection, to: \.reads, component: "OnRead")
    }
}

/// Answers writes of the selected characteristics or descriptors; throw an ``ATTError`` to refuse
/// one.
///
/// ```swift
/// OnWrite(Characteristics.setpoint) { request in
///     try await heater.set(request.value)
///     return .store
/// }
/// OnWrite(Characteristics.log, answering: .immediately) { request in
///     log.append(request.value)
///     return .accept
/// }
/// ```
///
/// Its handler runs in a task and may suspend, or, declared with `answering: .immediately`,
/// answers at once without a task; the handler that answers an attribute is chosen as for
/// ``OnRead``.
public struct OnWrite: GATTServerComponent {
    let selection: AttributeSelection
    let handler: StoredWriteHandler

    /// Answers writes of the characteristics named with `handler`, in a task of the request's own;
    /// `handler` may suspend.
    ///
    /// - Parameters:
    ///   - characteristic: A characteristic to answer for.
    ///   - others: More characteristics to answer for.
    ///   - handler: Says whether the server stores the value, or throws an ``ATTError``.
    public init(
        _ characteristic: any CharacteristicIdentifier, _ others: any CharacteristicIdentifier...,
        handler: @escaping GATTServerDefinition.WriteHandler
    ) {
        self.init(.characteristics([characteristic] + others), handler: handler)
    }

    /// Answers writes of the characteristics named with `handler`, at once and without a task.
    ///
    /// - Parameters:
    ///   - characteristic: A characteristic to answer for.
    ///   - others: More characteristics to answer for.
    ///   - answering: ``GATTServerDefinition/Answering/immediately``.
    ///   - handler: Says whether the server stores the value, or throws an ``ATTError``, without
    ///     suspending.
    public init(
        _ characteristic: any CharacteristicIdentifier, _ others: any CharacteristicIdentifier...,
        answering: GATTServerDefinition.Answering, handler: @escaping GATTServerDefinition.ImmediateWriteHandler
    ) {
        self.init(.characteristics([characteristic] + others), answering: answering, handler: handler)
    }

    /// Answers writes of the descriptors named with `handler`, in a task of the request's own;
    /// `handler` may suspend.
    ///
    /// - Parameters:
    ///   - descriptor: A descriptor to answer for, of the characteristic it names.
    ///   - others: More descriptors to answer for.
    ///   - handler: Says whether the server stores the value, or throws an ``ATTError``.
    public init(
        _ descriptor: any DescriptorIdentifier, _ others: any DescriptorIdentifier...,
        handler: @escaping GATTServerDefinition.WriteHandler
    ) {
        self.init(.descriptors([descriptor] + others), handler: handler)
    }

    /// Answers writes of the descriptors named with `handler`, at once and without a task.
    ///
    /// - Parameters:
    ///   - descriptor: A descriptor to answer for, of the characteristic it names.
    ///   - others: More descriptors to answer for.
    ///   - answering: ``GATTServerDefinition/Answering/immediately``.
    ///   - handler: Says whether the server stores the value, or throws an ``ATTError``, without
    ///     suspending.
    public init(
        _ descriptor: any DescriptorIdentifier, _ others: any DescriptorIdentifier...,
        answering: GATTServerDefinition.Answering, handler: @escaping GATTServerDefinition.ImmediateWriteHandler
    ) {
        self.init(.descriptors([descriptor] + others), answering: answering, handler: handler)
    }

    /// Answers writes of the attributes `selection` selects with `handler`, in a task of the
    /// request's own; `handler` may suspend.
    ///
    /// - Parameters:
    ///   - selection: The attributes to answer for, such as ``AttributeSelection/anyCharacteristic``.
    ///   - handler: Says whether the server stores the value, or throws an ``ATTError``.
    public init(_ selection: AttributeSelection, handler: @escaping GATTServerDefinition.WriteHandler) {
        self.selection = selection
        self.handler = StoredWriteHandler(inTask: handler)
    }

    /// Answers writes of the attributes `selection` selects with `handler`, at once and without a
    /// task.
    ///
    /// - Parameters:
    ///   - selection: The attributes to answer for, such as ``AttributeSelection/anyCharacteristic``.
    ///   - answering: ``GATTServerDefinition/Answering/immediately``.
    ///   - handler: Says whether the server stores the value, or throws an ``ATTError``, without
    ///     suspending.
    public init(
        _ selection: AttributeSelection, answering: GATTServerDefinition.Answering,
        handler: @escaping GATTServerDefinition.ImmediateWriteHandler
    ) {
        self.selection = selection
        self.handler = StoredWriteHandler(immediate: handler)
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(handler, for: selection, to: \.writes, component: "OnWrite")
    }
}

/// The attributes an ``OnRead`` or ``OnWrite`` answers for: characteristics or descriptors named
/// by their identifiers, or every characteristic or every descriptor no other handler names.
///
/// A handler that names an attribute answers it before one that selects
/// ``anyCharacteristic`` or ``anyDescriptor`` (see ``OnRead``).
public struct AttributeSelection: Sendable {
    enum Targets: Sendable {
        case characteristics([AttributePath])
        case descriptors([AttributePath])
        case anyCharacteristic
        case anyDescriptor
    }

    let targets: Targets

    /// Every characteristic that no other handler names (no other ``OnRead`` for reads, no other
    /// ``OnWrite`` for writes); never a descriptor.
    public static var anyCharacteristic: AttributeSelection { AttributeSelection(targets: .anyCharacteristic) }

    /// Every descriptor that no other handler names (no other ``OnRead`` for reads, no other
    /// ``OnWrite`` for writes); never a characteristic.
    ///
    /// The Client Characteristic Configuration descriptors are BlueZ's, and never come here.
    public static var anyDescriptor: AttributeSelection { AttributeSelection(targets: .anyDescriptor) }

    /// The characteristics `identifiers` name, for a list built at run time.
    ///
    /// - Parameter identifiers: The characteristics.
    /// - Returns: A selection of those characteristics.
    public static func characteristics(_ identifiers: [any CharacteristicIdentifier]) -> AttributeSelection {
        AttributeSelection(
            targets: .characteristics(
                identifiers.map { AttributePath(service: $0.service.uuid, characteristic: $0.uuid) }))
    }

    /// The descriptors `identifiers` name, each of the characteristic its identifier names, for a
    /// list built at run time.
    ///
    /// - Parameter identifiers: The descriptors.
    /// - Returns: A selection of those descriptors.
    public static func descriptors(_ identifiers: [any DescriptorIdentifier]) -> AttributeSelection {
        AttributeSelection(
            targets: .descriptors(
                identifiers.map {
                    AttributePath(
                        service: $0.characteristic.service.uuid, characteristic: $0.characteristic.uuid,
                        descriptor: $0.uuid)
                }))
    }
}

/// Called when a central connects to this server's adapter or disconnects from it.
///
/// Links this process opened as a central on the same adapter are not reported.
public struct OnConnectionStateChange: GATTServerComponent {
    let handler: @Sendable (GATTServer, CentralConnectionChange) async -> Void

    /// Calls `handler` with the server, the central, and whether it is connected now.
    public init(
        _ handler: @escaping @Sendable (_ server: GATTServer, _ central: Central, _ isConnected: Bool) async -> Void
    ) {
        self.handler = { server, change in await handler(server, change.central, change.isConnected) }
    }

    /// Calls `handler` with the server and the change, which also says why a link ended where
    /// the backend tells (``CentralConnectionChange/reason``).
    public init(_ handler: @escaping @Sendable (_ server: GATTServer, _ change: CentralConnectionChange) async -> Void)
    {
        self.handler = handler
    }

    public func apply(to definition: inout GATTServerDefinition) { definition.connectionHandlers.append(handler) }
}

/// A central's link to a server's adapter coming up or going down, as ``OnConnectionStateChange``
/// reports it.
public struct CentralConnectionChange: Sendable, Hashable, CustomStringConvertible {
    /// The central.
    public var central: Central
    /// Whether it is connected now.
    public var isConnected: Bool
    /// Why the link ended, for a disconnection, when the backend says: on BlueZ from 5.83, which
    /// announces it (`Device1.Disconnected`): "the central ended the link", "this adapter ended the
    /// link", "the link timed out" (the supervision timeout: the central went out of range or
    /// away), "authentication failed", "this host suspended", or BlueZ's own words for a reason it
    /// does not name. Earlier BlueZ says nothing, and it is `nil`. A simulated radio gives the
    /// fault or the side that ended the link. Always `nil` for a connection.
    public var reason: String?

    package init(central: Central, isConnected: Bool, reason: String? = nil) {
        self.central = central
        self.isConnected = isConnected
        self.reason = reason
    }

    public var description: String {
        isConnected ? "\(central) connected" : "\(central) disconnected" + (reason.map { " (\($0))" } ?? "")
    }
}

/// Called when a central subscribes to (`true`) or unsubscribes from (`false`) a characteristic.
///
/// `central` names the central where the backend says: always on the simulator; on BlueZ from
/// 5.69 for a characteristic that notifies and does not indicate (and from 5.80 also for one
/// that indicates and does not notify), through the `device` option of the server's
/// `AcquireNotify`. Elsewhere BlueZ says only that the first central subscribed or the last
/// left, and `central` is `nil`.
public struct OnSubscriptionChange: GATTServerComponent {
    let handler: @Sendable (GATTServer, Central?, BluetoothUUID, Bool) async -> Void
    /// Calls `handler` with the server, the central if BlueZ said, the characteristic, and whether
    /// it is subscribed now.
    public init(
        _ handler:
            @escaping @Sendable (
                _ server: GATTServer, _ central: Central?, _ characteristic: BluetoothUUID, _ isSubscribed: Bool
            ) async -> Void
    ) {
        self.handler = handler
    }
    public func apply(to definition: inout GATTServerDefinition) { definition.subscriptionHandlers.append(handler) }
}

/// Called when the server opens (`true`, registered with BlueZ) and closes (`false`).
///
/// A gap in serving while the server stays open (`bluetoothd` restarting) is reported by
/// ``OnServingChange``, not here.
public struct OnStateChange: GATTServerComponent {
    let handler: @Sendable (GATTServer, Bool) async -> Void
    /// Calls `handler` with the server and whether it is open now.
    public init(_ handler: @escaping @Sendable (_ server: GATTServer, _ isOpen: Bool) async -> Void) {
        self.handler = handler
    }
    public func apply(to definition: inout GATTServerDefinition) { definition.stateHandlers.append(handler) }
}

/// Called when an open server stops serving because the Bluetooth stack went away under it
/// (`bluetoothd` stopped or restarted, or the adapter was removed), and when it serves again.
///
/// The server stays open through the gap (``GATTServer/isOpen`` stays `true`): when the adapter
/// is back, the server registers its application again by itself and this handler is called
/// with ``ServingChange/isServing`` `true`. Every central's link and subscription ends with the
/// stack (their disconnections and unsubscriptions are reported first, through
/// ``OnConnectionStateChange`` and ``OnSubscriptionChange``); centrals connect and subscribe
/// again afterwards. ``GATTServer/isServing`` says where the server stands now.
///
/// ```swift
/// OnServingChange { server, change in
///     print(change.isServing ? "serving again" : "not serving: \(change.reason!)")
/// }
/// ```
///
/// The corresponding BlueZ method is `org.bluez.GattManager1.RegisterApplication`, called again
/// once `bluetoothd` is back on the bus and the adapter's `GattManager1` is there.
public struct OnServingChange: GATTServerComponent {
    let handler: @Sendable (GATTServer, ServingChange) async -> Void
    /// Calls `handler` with the server and the change.
    ///
    /// - Parameter handler: Called at the start and at the end of each gap, in that order.
    public init(_ handler: @escaping @Sendable (_ server: GATTServer, _ change: ServingChange) async -> Void) {
        self.handler = handler
    }
    public func apply(to definition: inout GATTServerDefinition) { definition.servingHandlers.append(handler) }
}

/// An open server stopping or resuming serving under it, as ``OnServingChange`` reports it.
public struct ServingChange: Sendable, CustomStringConvertible {
    /// Whether the server serves now: `false` when the gap begins, `true` when it ends.
    public var isServing: Bool
    /// Why the gap began: ``BluetoothError/Code/daemonUnavailable`` when `bluetoothd` left the
    /// bus (or the simulated stack stopped), ``BluetoothError/Code/adapterRemoved`` when the
    /// adapter went first; `nil` when the server serves again. A stopping `bluetoothd` removes
    /// its adapters before it leaves the bus, so on BlueZ a restart's gap may begin with
    /// ``BluetoothError/Code/adapterRemoved`` too.
    public var reason: BluetoothError?

    package init(isServing: Bool, reason: BluetoothError? = nil) {
        self.isServing = isServing
        self.reason = reason
    }

    public var description: String {
        isServing ? "serving" : "not serving" + (reason.map { " (\($0.code): \($0.message))" } ?? "")
    }
}

/// Lets the server manage its connected centrals: it keeps the list of connected centrals
/// from BlueZ and disconnects them all when it closes.
public struct AutoManageDevices: GATTServerComponent {
    let enabled: Bool
    /// Turns automatic device management on (the default) or off.
    public init(_ enabled: Bool = true) { self.enabled = enabled }
    public func apply(to definition: inout GATTServerDefinition) { definition.managesDevicesAutomatically = enabled }
}
