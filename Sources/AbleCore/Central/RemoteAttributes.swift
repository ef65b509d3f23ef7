/// A service of a connected peripheral, as discovered: what a central finds on another device.
///
/// `Remote` names the side: a ``Service`` declares a service of this adapter's own
/// ``GATTServer``.
public struct RemoteService: Sendable, Hashable, CustomStringConvertible {
    /// The service's UUID.
    public var uuid: BluetoothUUID
    /// Whether it is a primary service.
    public var isPrimary: Bool
    /// Its characteristics.
    public var characteristics: [RemoteCharacteristic]
    package let id: RemoteAttributeID

    package init(uuid: BluetoothUUID, isPrimary: Bool, characteristics: [RemoteCharacteristic], id: RemoteAttributeID) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.characteristics = characteristics
        self.id = id
    }

    public var description: String { "service \(uuid) (\(characteristics.count) characteristics)" }
}

/// A characteristic of a connected peripheral, as discovered: what a central finds on another
/// device. A ``Characteristic`` declares one of this adapter's own ``GATTServer``.
public struct RemoteCharacteristic: Sendable, Hashable, CustomStringConvertible {
    /// The characteristic's UUID.
    public var uuid: BluetoothUUID
    /// The UUID of its service.
    public var serviceUUID: BluetoothUUID
    /// What it allows: read, write, notify, …
    public var properties: CharacteristicProperties
    /// Its descriptors.
    public var descriptors: [RemoteDescriptor]
    package let id: RemoteAttributeID

    package init(
        uuid: BluetoothUUID, serviceUUID: BluetoothUUID, properties: CharacteristicProperties,
        descriptors: [RemoteDescriptor], id: RemoteAttributeID
    ) {
        self.uuid = uuid
        self.serviceUUID = serviceUUID
        self.properties = properties
        self.descriptors = descriptors
        self.id = id
    }

    public var description: String { "characteristic \(uuid) \(properties)" }
}

/// A descriptor of a connected peripheral, as discovered: what a central finds on another device.
/// A ``Descriptor`` declares one of this adapter's own ``GATTServer``.
public struct RemoteDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The descriptor's UUID.
    public var uuid: BluetoothUUID
    /// The UUID of its characteristic.
    public var characteristicUUID: BluetoothUUID
    package let id: RemoteAttributeID

    package init(uuid: BluetoothUUID, characteristicUUID: BluetoothUUID, id: RemoteAttributeID) {
        self.uuid = uuid
        self.characteristicUUID = characteristicUUID
        self.id = id
    }

    public var description: String { "descriptor \(uuid)" }
}

/// How a value is written to a characteristic.
public enum WriteType: Sendable, Hashable {
    /// Write Request: the peripheral confirms, or answers with an ATT error.
    case withResponse
    /// Write Command: no answer; at most ``Peripheral/maximumWriteLength(for:type:)`` bytes.
    ///
    /// Where the backend grants the characteristic a socket of its own (BlueZ `AcquireWrite`),
    /// the value goes into that socket instead of a D-Bus call; see
    /// ``Peripheral/write(_:to:type:offset:)``.
    case withoutResponse
    /// Reliable Write: the value goes out in Prepare Write Requests, the peripheral echoes each
    /// piece, and only an Execute Write Request after every echo matched makes the peripheral
    /// apply them all; a mismatch cancels the whole write. Up to 512 bytes.
    ///
    /// The corresponding BlueZ option is `WriteValue`'s `type: reliable`.
    case reliable
}

/// Which attribute of a peripheral's database a discovered service, characteristic or descriptor
/// is. Opaque to users: each backend fills it in and maps it back to its own attribute, BlueZ
/// from the ATT handles that name its objects (`service000a/char000b/desc000d`), the simulator
/// from the positions in the served definition.
package struct RemoteAttributeID: Hashable, Sendable, CustomStringConvertible {
    /// The attribute's path through the database: service, then characteristic, then descriptor.
    package var components: [UInt16]

    package init(_ components: [UInt16]) {
        self.components = components
    }

    package var description: String {
        components.map { Hex.format($0, digits: 4) }.joined(separator: "/")
    }
}
