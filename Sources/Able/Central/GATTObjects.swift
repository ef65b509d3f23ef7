/// A service of a connected peripheral, as discovered.
public struct GATTService: Sendable, Hashable, CustomStringConvertible {
    /// The service's UUID.
    public var uuid: BluetoothUUID
    /// Whether it is a primary service.
    public var isPrimary: Bool
    /// Its characteristics.
    public var characteristics: [GATTCharacteristic]
    package let handle: String

    package init(uuid: BluetoothUUID, isPrimary: Bool, characteristics: [GATTCharacteristic], handle: String) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.characteristics = characteristics
        self.handle = handle
    }

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
    package let handle: String

    package init(
        uuid: BluetoothUUID, serviceUUID: BluetoothUUID, properties: CharacteristicProperties,
        descriptors: [GATTDescriptor], handle: String
    ) {
        self.uuid = uuid
        self.serviceUUID = serviceUUID
        self.properties = properties
        self.descriptors = descriptors
        self.handle = handle
    }

    public var description: String { "characteristic \(uuid) \(properties)" }
}

/// A descriptor of a connected peripheral, as discovered.
public struct GATTDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The descriptor's UUID.
    public var uuid: BluetoothUUID
    /// The UUID of its characteristic.
    public var characteristicUUID: BluetoothUUID
    package let handle: String

    package init(uuid: BluetoothUUID, characteristicUUID: BluetoothUUID, handle: String) {
        self.uuid = uuid
        self.characteristicUUID = characteristicUUID
        self.handle = handle
    }

    public var description: String { "descriptor \(uuid)" }
}

/// How a value is written to a characteristic.
public enum WriteType: Sendable, Hashable {
    /// Write Request: the peripheral confirms, or answers with an ATT error.
    case withResponse
    /// Write Command: no answer; at most ``Peripheral/maximumWriteLength(for:)`` bytes.
    case withoutResponse
}
