/// Answers reads of the listed characteristics with the value returned; throw an ``ATTError``
/// to answer with that error.
///
/// A handler comes in two forms, and Swift picks by its body:
/// - One that does not `await` (``GATTServerDefinition/ImmediateReadHandler``) is called as the
///   request arrives (on BlueZ, on the thread that reads the D-Bus connection), and its answer goes
///   out at once: no task is made and no thread is woken, the cheapest way to serve a read. It
///   must return quickly and never block, and must not rely on the task it is called in: on BlueZ
///   there is none, so it sees no task-local values.
/// - One that may suspend (``GATTServerDefinition/ReadHandler``) runs in a task of its own, which
///   starts on the same thread and runs there until the handler first suspends. A request that
///   names its central is answered with ``ATTError/unlikelyError``, and its task cancelled, if the
///   server disconnects that central first (``GATTServer/disconnect(_:)``).
///
/// The same holds for ``OnWrite``, the descriptor handlers and the catch-alls.
public struct OnRead: GATTServerComponent {
    let uuids: [BluetoothUUID]
    let handler: StoredReadHandler

    /// Answers reads of the characteristics `uuids` with `handler`'s value; `handler` may suspend.
    public init(_ uuids: [BluetoothUUID], _ handler: @escaping GATTServerDefinition.ReadHandler) {
        self.uuids = uuids
        self.handler = StoredReadHandler(handler)
    }

    /// Answers reads of the characteristics `uuids` at once with `handler`'s value.
    public init(_ uuids: [BluetoothUUID], _ handler: @escaping GATTServerDefinition.ImmediateReadHandler) {
        self.uuids = uuids
        self.handler = StoredReadHandler(handler)
    }

    /// Answers reads of the characteristics `identifiers` with `handler`'s value; `handler` may
    /// suspend.
    public init(_ identifiers: any CharacteristicIdentifier..., handler: @escaping GATTServerDefinition.ReadHandler) {
        self.init(identifiers.map(\.uuid), handler)
    }

    /// Answers reads of the characteristics `identifiers` at once with `handler`'s value.
    public init(
        _ identifiers: any CharacteristicIdentifier..., handler: @escaping GATTServerDefinition.ImmediateReadHandler
    ) {
        self.init(identifiers.map(\.uuid), handler)
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(uuids, handler, to: \.characteristicReads, kind: "OnRead")
    }
}

/// Answers writes of the listed characteristics; throw an ``ATTError`` to refuse one.
///
/// Its handler may suspend or answer at once, as ``OnRead``'s does.
public struct OnWrite: GATTServerComponent {
    let uuids: [BluetoothUUID]
    let handler: StoredWriteHandler

    /// Answers writes of the characteristics `uuids` with `handler`, which may suspend.
    public init(_ uuids: [BluetoothUUID], _ handler: @escaping GATTServerDefinition.WriteHandler) {
        self.uuids = uuids
        self.handler = StoredWriteHandler(handler)
    }

    /// Answers writes of the characteristics `uuids` at once with `handler`.
    public init(_ uuids: [BluetoothUUID], _ handler: @escaping GATTServerDefinition.ImmediateWriteHandler) {
        self.uuids = uuids
        self.handler = StoredWriteHandler(handler)
    }

    /// Answers writes of the characteristics `identifiers` with `handler`, which may suspend.
    public init(_ identifiers: any CharacteristicIdentifier..., handler: @escaping GATTServerDefinition.WriteHandler) {
        self.init(identifiers.map(\.uuid), handler)
    }

    /// Answers writes of the characteristics `identifiers` at once with `handler`.
    public init(
        _ identifiers: any CharacteristicIdentifier..., handler: @escaping GATTServerDefinition.ImmediateWriteHandler
    ) {
        self.init(identifiers.map(\.uuid), handler)
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(uuids, handler, to: \.characteristicWrites, kind: "OnWrite")
    }
}

/// Answers reads of the listed descriptors.
///
/// Its handler may suspend or answer at once, as ``OnRead``'s does.
public struct OnReadDescriptor: GATTServerComponent {
    let uuids: [BluetoothUUID]
    let handler: StoredReadHandler

    /// Answers reads of the descriptors `uuids` with `handler`'s value; `handler` may suspend.
    public init(_ uuids: BluetoothUUID..., handler: @escaping GATTServerDefinition.ReadHandler) {
        self.uuids = uuids
        self.handler = StoredReadHandler(handler)
    }

    /// Answers reads of the descriptors `uuids` at once with `handler`'s value.
    public init(_ uuids: BluetoothUUID..., handler: @escaping GATTServerDefinition.ImmediateReadHandler) {
        self.uuids = uuids
        self.handler = StoredReadHandler(handler)
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(uuids, handler, to: \.descriptorReads, kind: "OnReadDescriptor")
    }
}

/// Answers writes of the listed descriptors.
///
/// Its handler may suspend or answer at once, as ``OnRead``'s does.
public struct OnWriteDescriptor: GATTServerComponent {
    let uuids: [BluetoothUUID]
    let handler: StoredWriteHandler

    /// Answers writes of the descriptors `uuids` with `handler`, which may suspend.
    public init(_ uuids: BluetoothUUID..., handler: @escaping GATTServerDefinition.WriteHandler) {
        self.uuids = uuids
        self.handler = StoredWriteHandler(handler)
    }

    /// Answers writes of the descriptors `uuids` at once with `handler`.
    public init(_ uuids: BluetoothUUID..., handler: @escaping GATTServerDefinition.ImmediateWriteHandler) {
        self.uuids = uuids
        self.handler = StoredWriteHandler(handler)
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(uuids, handler, to: \.descriptorWrites, kind: "OnWriteDescriptor")
    }
}

/// Answers reads of every characteristic no ``OnRead`` covers.
///
/// Its handler may suspend or answer at once, as ``OnRead``'s does.
public struct OnAnyRead: GATTServerComponent {
    let handler: StoredReadHandler
    /// Answers the reads no ``OnRead`` covers with `handler`'s value; `handler` may suspend.
    public init(_ handler: @escaping GATTServerDefinition.ReadHandler) { self.handler = StoredReadHandler(handler) }
    /// Answers the reads no ``OnRead`` covers at once with `handler`'s value.
    public init(_ handler: @escaping GATTServerDefinition.ImmediateReadHandler) {
        self.handler = StoredReadHandler(handler)
    }
    public func apply(to definition: inout GATTServerDefinition) {
        definition.setCatchAll(\.anyCharacteristicRead, handler, kind: "OnAnyRead")
    }
}

/// Answers writes of every characteristic no ``OnWrite`` covers.
///
/// Its handler may suspend or answer at once, as ``OnRead``'s does.
public struct OnAnyWrite: GATTServerComponent {
    let handler: StoredWriteHandler
    /// Answers the writes no ``OnWrite`` covers with `handler`, which may suspend.
    public init(_ handler: @escaping GATTServerDefinition.WriteHandler) { self.handler = StoredWriteHandler(handler) }
    /// Answers the writes no ``OnWrite`` covers at once with `handler`.
    public init(_ handler: @escaping GATTServerDefinition.ImmediateWriteHandler) {
        self.handler = StoredWriteHandler(handler)
    }
    public func apply(to definition: inout GATTServerDefinition) {
        definition.setCatchAll(\.anyCharacteristicWrite, handler, kind: "OnAnyWrite")
    }
}

/// Answers reads of every descriptor no ``OnReadDescriptor`` covers.
///
/// Its handler may suspend or answer at once, as ``OnRead``'s does.
public struct OnAnyReadDescriptor: GATTServerComponent {
    let handler: StoredReadHandler
    /// Answers the descriptor reads no ``OnReadDescriptor`` covers with `handler`'s value;
    /// `handler` may suspend.
    public init(_ handler: @escaping GATTServerDefinition.ReadHandler) { self.handler = StoredReadHandler(handler) }
    /// Answers the descriptor reads no ``OnReadDescriptor`` covers at once with `handler`'s value.
    public init(_ handler: @escaping GATTServerDefinition.ImmediateReadHandler) {
        self.handler = StoredReadHandler(handler)
    }
    public func apply(to definition: inout GATTServerDefinition) {
        definition.setCatchAll(\.anyDescriptorRead, handler, kind: "OnAnyReadDescriptor")
    }
}

/// Answers writes of every descriptor no ``OnWriteDescriptor`` covers.
///
/// Its handler may suspend or answer at once, as ``OnRead``'s does.
public struct OnAnyWriteDescriptor: GATTServerComponent {
    let handler: StoredWriteHandler
    /// Answers the descriptor writes no ``OnWriteDescriptor`` covers with `handler`, which may
    /// suspend.
    public init(_ handler: @escaping GATTServerDefinition.WriteHandler) { self.handler = StoredWriteHandler(handler) }
    /// Answers the descriptor writes no ``OnWriteDescriptor`` covers at once with `handler`.
    public init(_ handler: @escaping GATTServerDefinition.ImmediateWriteHandler) {
        self.handler = StoredWriteHandler(handler)
    }
    public func apply(to definition: inout GATTServerDefinition) {
        definition.setCatchAll(\.anyDescriptorWrite, handler, kind: "OnAnyWriteDescriptor")
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
public struct OnStateChange: GATTServerComponent {
    let handler: @Sendable (GATTServer, Bool) async -> Void
    /// Calls `handler` with the server and whether it is open now.
    public init(_ handler: @escaping @Sendable (_ server: GATTServer, _ isOpen: Bool) async -> Void) {
        self.handler = handler
    }
    public func apply(to definition: inout GATTServerDefinition) { definition.stateHandlers.append(handler) }
}

/// Lets the server manage its connected centrals: it keeps the list of connected centrals
/// from BlueZ and disconnects them all when it closes.
public struct AutoManageDevices: GATTServerComponent {
    let enabled: Bool
    /// Turns automatic device management on (the default) or off.
    public init(_ enabled: Bool = true) { self.enabled = enabled }
    public func apply(to definition: inout GATTServerDefinition) { definition.managesDevicesAutomatically = enabled }
}
