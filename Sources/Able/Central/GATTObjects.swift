/// A service of a connected peripheral, as discovered.
public struct GATTService: Sendable, Hashable, CustomStringConvertible {
    /// The service's UUID.
    public var uuid: BluetoothUUID
    /// Whether it is a primary service.
    public var isPrimary: Bool
    /// Its characteristics.
    public var characteristics: [GATTCharacteristic]
    let handle: String

    public var description: String { "service \(uuid) (\(characteristics.count) characteristics)" }
}

/// A characteristic of a connected peripheral, as discovered.
public struct GATTCharacteristic: Sendable, Hashable, CustomStringConvertible {
    /// The characteristic's UUID.
    public var uuid: BluetoothUUID
    /// The UUID of its service.
    public var serviceUUID: BluetoothUUID
    /// What it allows: read, write, notify, …
    public var properties: CharacteristicProperties
    /// Its descriptors.
    public var descriptors: [GATTDescriptor]
    let handle: String

    public var description: String { "characteristic \(uuid) \(properties)" }
}

/// A descriptor of a connected peripheral, as discovered.
public struct GATTDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The descriptor's UUID.
    public var uuid: BluetoothUUID
    /// The UUID of its characteristic.
    public var characteristicUUID: BluetoothUUID
    let handle: String

    public var description: String { "descriptor \(uuid)" }
}

/// How a value is written to a characteristic.
public enum WriteType: Sendable, Hashable {
    /// Write Request: the peripheral confirms, or answers with an ATT error.
    case withResponse
    /// Write Command: no answer; at most ``Peripheral/maximumWriteLength(for:)`` bytes.
    case withoutResponse
}
