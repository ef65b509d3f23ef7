/// Answers reads of the listed characteristics with the value returned; throw an ``ATTError``
/// to answer with that error.
public struct OnRead: GATTServerComponent {
    let uuids: [BluetoothUUID]
    let handler: GATTServerDefinition.ReadHandler

    /// Answers reads of the characteristics `uuids` with `handler`'s value.
    public init(_ uuids: [BluetoothUUID], _ handler: @escaping GATTServerDefinition.ReadHandler) {
        self.uuids = uuids
        self.handler = handler
    }

    /// Answers reads of the characteristics `identifiers` with `handler`'s value.
    public init(_ identifiers: any CharacteristicIdentifier..., handler: @escaping GATTServerDefinition.ReadHandler) {
        self.init(identifiers.map(\.uuid), handler)
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(uuids, StoredReadHandler(handle: handler), to: \.characteristicReads, kind: "OnRead")
    }
}

/// Answers writes of the listed characteristics; throw an ``ATTError`` to refuse one.
public struct OnWrite: GATTServerComponent {
    let uuids: [BluetoothUUID]
    let handler: GATTServerDefinition.WriteHandler

    /// Answers writes of the characteristics `uuids` with `handler`.
    public init(_ uuids: [BluetoothUUID], _ handler: @escaping GATTServerDefinition.WriteHandler) {
        self.uuids = uuids
        self.handler = handler
    }

    /// Answers writes of the characteristics `identifiers` with `handler`.
    public init(_ identifiers: any CharacteristicIdentifier..., handler: @escaping GATTServerDefinition.WriteHandler) {
        self.init(identifiers.map(\.uuid), handler)
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(uuids, StoredWriteHandler(handle: handler), to: \.characteristicWrites, kind: "OnWrite")
    }
}

/// Answers reads of the listed descriptors.
public struct OnReadDescriptor: GATTServerComponent {
    let uuids: [BluetoothUUID]
    let handler: GATTServerDefinition.ReadHandler

    /// Answers reads of the descriptors `uuids` with `handler`'s value.
    public init(_ uuids: BluetoothUUID..., handler: @escaping GATTServerDefinition.ReadHandler) {
        self.uuids = uuids
        self.handler = handler
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(uuids, StoredReadHandler(handle: handler), to: \.descriptorReads, kind: "OnReadDescriptor")
    }
}

/// Answers writes of the listed descriptors.
public struct OnWriteDescriptor: GATTServerComponent {
    let uuids: [BluetoothUUID]
    let handler: GATTServerDefinition.WriteHandler

    /// Answers writes of the descriptors `uuids` with `handler`.
    public init(_ uuids: BluetoothUUID..., handler: @escaping GATTServerDefinition.WriteHandler) {
        self.uuids = uuids
        self.handler = handler
    }

    public func apply(to definition: inout GATTServerDefinition) {
        definition.add(uuids, StoredWriteHandler(handle: handler), to: \.descriptorWrites, kind: "OnWriteDescriptor")
    }
}

/// Answers reads of every characteristic no ``OnRead`` covers.
public struct OnAnyRead: GATTServerComponent {
    let handler: GATTServerDefinition.ReadHandler
    /// Answers the reads no ``OnRead`` covers with `handler`'s value.
    public init(_ handler: @escaping GATTServerDefinition.ReadHandler) { self.handler = handler }
    public func apply(to definition: inout GATTServerDefinition) {
        definition.setCatchAll(\.anyCharacteristicRead, StoredReadHandler(handle: handler), kind: "OnAnyRead")
    }
}

/// Answers writes of every characteristic no ``OnWrite`` covers.
public struct OnAnyWrite: GATTServerComponent {
    let handler: GATTServerDefinition.WriteHandler
    /// Answers the writes no ``OnWrite`` covers with `handler`.
    public init(_ handler: @escaping GATTServerDefinition.WriteHandler) { self.handler = handler }
    public func apply(to definition: inout GATTServerDefinition) {
        definition.setCatchAll(\.anyCharacteristicWrite, StoredWriteHandler(handle: handler), kind: "OnAnyWrite")
    }
}

/// Answers reads of every descriptor no ``OnReadDescriptor`` covers.
public struct OnAnyReadDescriptor: GATTServerComponent {
    let handler: GATTServerDefinition.ReadHandler
    /// Answers the descriptor reads no ``OnReadDescriptor`` covers with `handler`'s value.
    public init(_ handler: @escaping GATTServerDefinition.ReadHandler) { self.handler = handler }
    public func apply(to definition: inout GATTServerDefinition) {
        definition.setCatchAll(\.anyDescriptorRead, StoredReadHandler(handle: handler), kind: "OnAnyReadDescriptor")
    }
}

/// Answers writes of every descriptor no ``OnWriteDescriptor`` covers.
public struct OnAnyWriteDescriptor: GATTServerComponent {
    let handler: GATTServerDefinition.WriteHandler
    /// Answers the descriptor writes no ``OnWriteDescriptor`` covers with `handler`.
    public init(_ handler: @escaping GATTServerDefinition.WriteHandler) { self.handler = handler }
    public func apply(to definition: inout GATTServerDefinition) {
        definition.setCatchAll(\.anyDescriptorWrite, StoredWriteHandler(handle: handler), kind: "OnAnyWriteDescriptor")
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
