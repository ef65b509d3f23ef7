/// One thing declared in a GATT server's builder block: a service, a handler, or an option.
///
/// Only the types of this module conform, so a wrong component is a compile-time error.
public protocol GATTServerComponent: Sendable {
    /// Adds this component to a server definition.
    func apply(to definition: inout GATTServerDefinition)
}

/// Builds a ``GATTServerDefinition`` from a block of components, with `if`, `if`/`else` and `for`.
///
/// ```swift
/// let psmID = CharacteristicID(psmUUID, service: serviceID)
/// let definition = GATTServerDefinition {
///     Service(serviceID) {
///         Characteristic(psmID, properties: [.read, .indicate], permissions: .readable)
///     }
///     OnRead(psmID, answering: .immediately) { request in psm.bytes }
///     OnConnectionStateChange { server, central, isConnected in print(central, isConnected) }
/// }
/// ```
@resultBuilder
public enum GATTServerBuilder {
    public static func buildExpression(_ component: some GATTServerComponent) -> [any GATTServerComponent] {
        [component]
    }
    public static func buildBlock(_ components: [any GATTServerComponent]...) -> [any GATTServerComponent] {
        components.flatMap { $0 }
    }
    public static func buildOptional(_ component: [any GATTServerComponent]?) -> [any GATTServerComponent] {
        component ?? []
    }
    public static func buildEither(first component: [any GATTServerComponent]) -> [any GATTServerComponent] {
        component
    }
    public static func buildEither(second component: [any GATTServerComponent]) -> [any GATTServerComponent] {
        component
    }
    public static func buildArray(_ components: [[any GATTServerComponent]]) -> [any GATTServerComponent] {
        components.flatMap { $0 }
    }
}

/// Builds the characteristics of a ``Service``.
@resultBuilder
public enum ServiceBuilder {
    public static func buildExpression(_ characteristic: Characteristic) -> [Characteristic] { [characteristic] }
    public static func buildBlock(_ components: [Characteristic]...) -> [Characteristic] { components.flatMap { $0 } }
    public static func buildOptional(_ component: [Characteristic]?) -> [Characteristic] { component ?? [] }
    public static func buildEither(first component: [Characteristic]) -> [Characteristic] { component }
    public static func buildEither(second component: [Characteristic]) -> [Characteristic] { component }
    public static func buildArray(_ components: [[Characteristic]]) -> [Characteristic] { components.flatMap { $0 } }
}

/// Builds the descriptors of a ``Characteristic``.
@resultBuilder
public enum CharacteristicBuilder {
    public static func buildExpression(_ descriptor: Descriptor) -> [Descriptor] { [descriptor] }
    public static func buildBlock(_ components: [Descriptor]...) -> [Descriptor] { components.flatMap { $0 } }
    public static func buildOptional(_ component: [Descriptor]?) -> [Descriptor] { component ?? [] }
    public static func buildEither(first component: [Descriptor]) -> [Descriptor] { component }
    public static func buildEither(second component: [Descriptor]) -> [Descriptor] { component }
    public static func buildArray(_ components: [[Descriptor]]) -> [Descriptor] { components.flatMap { $0 } }
}

/// A GATT service and its characteristics, declared for this adapter's ``GATTServer``.
///
/// Declarations are bare nouns, written inside the server's builder block; what a central finds
/// on another device is a ``RemoteService``.
public struct Service: GATTServerComponent {
    /// Whether a service is primary or included by another.
    public enum Kind: Sendable, Hashable {
        /// A service a central discovers on its own.
        case primary
        /// A service meant to be included by another.
        case secondary
    }

    /// The service's UUID.
    public var uuid: BluetoothUUID
    /// Whether the service is primary or secondary.
    public var kind: Kind
    /// The service's characteristics, in the order declared.
    public var characteristics: [Characteristic]

    /// Declares a service.
    ///
    /// - Parameters:
    ///   - uuid: Its UUID.
    ///   - kind: Primary (the default) or secondary.
    ///   - characteristics: Its characteristics, written in the builder block.
    public init(
        _ uuid: BluetoothUUID, _ kind: Kind = .primary, @ServiceBuilder characteristics: () -> [Characteristic] = { [] }
    ) {
        self.uuid = uuid
        self.kind = kind
        self.characteristics = characteristics()
    }

    /// Declares a service through a typed identifier, like the initializer that takes its UUID.
    public init(
        _ identifier: some ServiceIdentifier, _ kind: Kind = .primary,
        @ServiceBuilder characteristics: () -> [Characteristic] = { [] }
    ) {
        self.init(identifier.uuid, kind, characteristics: characteristics)
    }

    public func apply(to definition: inout GATTServerDefinition) { definition.services.append(self) }
}

/// A characteristic of a ``Service``: its properties, permissions, initial value and descriptors
/// (a central's view of another device's characteristic is a ``RemoteCharacteristic``).
///
/// A characteristic with no ``OnRead`` or ``OnWrite`` handler serves its stored value, and
/// writes update it (subject to its permissions).
public struct Characteristic: Sendable {
    /// The characteristic's UUID.
    public var uuid: BluetoothUUID
    /// What centrals may do with it: read, write, notify, indicate…
    public var properties: CharacteristicProperties
    /// The security reads and writes require.
    public var permissions: AttributePermissions
    /// The initial stored value, served when no ``OnRead`` handler answers.
    public var value: [UInt8]
    /// Its descriptors, in the order declared.
    public var descriptors: [Descriptor]

    /// Declares a characteristic.
    ///
    /// - Parameters:
    ///   - uuid: Its UUID.
    ///   - properties: What centrals may do: read, write, notify, indicate…
    ///   - permissions: The security reads and writes require; by default readable if
    ///     `properties` has `.read`, writable if it has a kind of write.
    ///   - value: The initial stored value.
    ///   - descriptors: Its descriptors (BlueZ adds the Client Characteristic Configuration itself).
    public init(
        _ uuid: BluetoothUUID, properties: CharacteristicProperties, permissions: AttributePermissions? = nil,
        value: [UInt8] = [], @CharacteristicBuilder descriptors: () -> [Descriptor] = { [] }
    ) {
        self.uuid = uuid
        self.properties = properties
        self.permissions = permissions ?? Self.defaultPermissions(for: properties)
        self.value = value
        self.descriptors = descriptors()
    }

    /// Declares a characteristic through a typed identifier, like the initializer that takes its UUID.
    public init(
        _ identifier: some CharacteristicIdentifier, properties: CharacteristicProperties,
        permissions: AttributePermissions? = nil, value: [UInt8] = [],
        @CharacteristicBuilder descriptors: () -> [Descriptor] = { [] }
    ) {
        self.init(
            identifier.uuid, properties: properties, permissions: permissions, value: value, descriptors: descriptors)
    }

    static func defaultPermissions(for properties: CharacteristicProperties) -> AttributePermissions {
        var permissions: AttributePermissions = []
        if properties.contains(.read) { permissions.insert(.readable) }
        if !properties.isDisjoint(with: [.write, .writeWithoutResponse, .reliableWrite]) {
            permissions.insert(.writable)
        }
        return permissions
    }

    var isReadable: Bool {
        !permissions.isDisjoint(with: [.readable, .readEncrypted, .readEncryptedAuthenticated, .readSecure])
    }

    var isWritable: Bool {
        !permissions.isDisjoint(with: [.writable, .writeEncrypted, .writeEncryptedAuthenticated, .writeSecure])
    }
}

/// A descriptor of a ``Characteristic`` (a central's view of another device's descriptor is a
/// ``RemoteDescriptor``).
public struct Descriptor: Sendable {
    /// The descriptor's UUID.
    public var uuid: BluetoothUUID
    /// The security reads and writes of the descriptor require.
    public var permissions: AttributePermissions
    /// The initial stored value.
    public var value: [UInt8]

    /// Declares a descriptor.
    ///
    /// - Parameters:
    ///   - uuid: Its UUID, such as ``BluetoothUUID/characteristicUserDescription``.
    ///   - permissions: The security reads and writes require; readable by default.
    ///   - value: The initial stored value.
    public init(_ uuid: BluetoothUUID, permissions: AttributePermissions = .readable, value: [UInt8] = []) {
        self.uuid = uuid
        self.permissions = permissions
        self.value = value
    }

    var isReadable: Bool {
        !permissions.isDisjoint(with: [.readable, .readEncrypted, .readEncryptedAuthenticated, .readSecure])
    }

    var isWritable: Bool {
        !permissions.isDisjoint(with: [.writable, .writeEncrypted, .writeEncryptedAuthenticated, .writeSecure])
    }
}
