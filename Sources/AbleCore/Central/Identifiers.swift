/// A GATT service a program knows by type, such as a case of an enum of its services.
///
/// ```swift
/// enum Services: String, ServiceIdentifier {
///     case heartRate = "180D"
/// }
/// ```
public protocol ServiceIdentifier: Sendable {
    /// The service's UUID.
    var uuid: BluetoothUUID { get }
}

/// A GATT characteristic a program knows by type, including the service it belongs to.
///
/// ```swift
/// enum Characteristics: String, CharacteristicIdentifier {
///     case measurement = "2A37"
///     var service: any ServiceIdentifier { Services.heartRate }
/// }
/// ```
public protocol CharacteristicIdentifier: Sendable {
    /// The characteristic's UUID.
    var uuid: BluetoothUUID { get }
    /// The service the characteristic belongs to.
    var service: any ServiceIdentifier { get }
}

/// A GATT descriptor a program knows by type, including its characteristic.
public protocol DescriptorIdentifier: Sendable {
    /// The descriptor's UUID.
    var uuid: BluetoothUUID { get }
    /// The characteristic the descriptor belongs to.
    var characteristic: any CharacteristicIdentifier { get }
}

extension ServiceIdentifier where Self: RawRepresentable, RawValue == String {
    /// The UUID spelled by the raw value; a raw value that is no UUID is a programming error.
    public var uuid: BluetoothUUID { BluetoothUUID.parsing(rawValue, for: Self.self) }
}

extension CharacteristicIdentifier where Self: RawRepresentable, RawValue == String {
    /// The UUID spelled by the raw value; a raw value that is no UUID is a programming error.
    public var uuid: BluetoothUUID { BluetoothUUID.parsing(rawValue, for: Self.self) }
}

extension DescriptorIdentifier where Self: RawRepresentable, RawValue == String {
    /// The UUID spelled by the raw value; a raw value that is no UUID is a programming error.
    public var uuid: BluetoothUUID { BluetoothUUID.parsing(rawValue, for: Self.self) }
}

extension BluetoothUUID {
    static func parsing<T>(_ text: String, for type: T.Type) -> BluetoothUUID {
        guard let uuid = BluetoothUUID(text) else { preconditionFailure("\(T.self): '\(text)' is not a UUID") }
        return uuid
    }
}

/// A service named by its UUID alone, for code that has no identifier type.
public struct ServiceID: ServiceIdentifier, Hashable {
    /// The service's UUID.
    public var uuid: BluetoothUUID
    /// Names the service `uuid`.
    public init(_ uuid: BluetoothUUID) { self.uuid = uuid }
}

/// A characteristic named by its UUID and its service's UUID.
public struct CharacteristicID: CharacteristicIdentifier {
    /// The characteristic's UUID.
    public var uuid: BluetoothUUID
    /// The service the characteristic belongs to.
    public var service: any ServiceIdentifier
    /// Names the characteristic `uuid` of the service `service`.
    public init(_ uuid: BluetoothUUID, service: BluetoothUUID) {
        self.uuid = uuid
        self.service = ServiceID(service)
    }
}

/// A descriptor named by its UUID and its characteristic.
public struct DescriptorID: DescriptorIdentifier {
    /// The descriptor's UUID.
    public var uuid: BluetoothUUID
    /// The characteristic the descriptor belongs to.
    public var characteristic: any CharacteristicIdentifier
    /// Names the descriptor `uuid` of `characteristic`.
    public init(_ uuid: BluetoothUUID, characteristic: any CharacteristicIdentifier) {
        self.uuid = uuid
        self.characteristic = characteristic
    }
}
