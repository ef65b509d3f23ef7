import AbleStreams

/// What the adapter advertises, and how.
///
/// BlueZ builds the advertising data from these fields; on controllers with legacy advertising
/// only (such as the emulated ones in Able's test guest) it must fit 31 bytes, flags included.
public struct Advertisement: Sendable, Hashable {
    /// The name to advertise, or `nil` for none.
    public var localName: String?
    /// The services to advertise.
    public var serviceUUIDs: [BluetoothUUID]
    /// Manufacturer-specific data, by company identifier.
    public var manufacturerData: [UInt16: [UInt8]]
    /// Service data, by service UUID.
    public var serviceData: [BluetoothUUID: [UInt8]]
    /// The GAP appearance value.
    public var appearance: UInt16?
    /// Whether to include the transmit power.
    public var includesTxPower: Bool
    /// Whether centrals may discover the device in general discovery (sets the AD flags).
    public var isDiscoverable: Bool
    /// Whether centrals may connect (a `peripheral` advertisement) or only listen (`broadcast`).
    public var isConnectable: Bool
    /// How long BlueZ keeps the advertisement before releasing it, or `nil` for as long as it runs.
    public var timeout: Duration?
    /// How long each rotation slot lasts when several advertisements share the controller.
    public var duration: Duration?

    /// An advertisement; by default discoverable and connectable, with nothing but the flags.
    public init(
        localName: String? = nil, serviceUUIDs: [BluetoothUUID] = [], manufacturerData: [UInt16: [UInt8]] = [:],
        serviceData: [BluetoothUUID: [UInt8]] = [:], appearance: UInt16? = nil, includesTxPower: Bool = false,
        isDiscoverable: Bool = true, isConnectable: Bool = true, timeout: Duration? = nil, duration: Duration? = nil
    ) {
        self.localName = localName
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.appearance = appearance
        self.includesTxPower = includesTxPower
        self.isDiscoverable = isDiscoverable
        self.isConnectable = isConnectable
        self.timeout = timeout
        self.duration = duration
    }

    /// The bytes of legacy advertising data this advertisement needs, the 3-byte flags included.
    public var legacyLength: Int {
        let data = AdvertisementData(
            localName: localName, serviceUUIDs: serviceUUIDs, manufacturerData: manufacturerData,
            serviceData: serviceData,
            txPowerLevel: includesTxPower ? 0 : nil, appearance: appearance)
        return data.encodedLength + 3
    }

    /// Checks that the advertisement fits legacy advertising.
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/valueTooLong``, saying by how much.
    public func validateLegacyLength() throws {
        let length = legacyLength
        guard length <= AdvertisementData.legacyMaximumLength else {
            throw BluetoothError(
                .valueTooLong,
                message:
                    "the advertisement needs \(length) bytes; legacy advertising carries \(AdvertisementData.legacyMaximumLength)"
                    + " (shorten the name, advertise fewer or 16-bit UUIDs, or drop data)")
        }
    }
}

/// A running advertisement, from ``Adapter/startAdvertising(_:)``; ``stop()`` ends it.
public actor AdvertisingSet {
    let stopAction: @Sendable () async -> Void
    let released: ReleaseFlag

    package init(released: ReleaseFlag, stop: @escaping @Sendable () async -> Void) {
        self.released = released
        self.stopAction = stop
    }

    private var stopped = false

    /// Whether the advertisement is still on air: not stopped, and not released by BlueZ (for
    /// example after its ``Advertisement/timeout``).
    public var isActive: Bool { !stopped && !released.value }

    /// Stops advertising; calling it again does nothing.
    ///
    /// The corresponding BlueZ method is `org.bluez.LEAdvertisingManager1.UnregisterAdvertisement`.
    public func stop() async {
        guard !stopped else { return }
        stopped = true
        await stopAction()
    }
}

/// Set when BlueZ releases an advertisement.
package final class ReleaseFlag: Sendable {
    private let flag = Lock(false)
    package init() {}
    package var value: Bool { flag.withLock { $0 } }
    package func set() { flag.withLock { $0 = true } }
}
