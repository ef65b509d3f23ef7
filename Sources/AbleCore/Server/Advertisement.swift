import AbleIO

/// What the adapter advertises, and how.
///
/// BlueZ builds the advertising data from these fields (see ``Layout`` for what goes where):
/// the flags, service and solicited UUIDs, service data, appearance, TX power and manufacturer
/// data go into the advertising data; the local name goes into the scan response, after the
/// ``scanResponse``'s own fields, complete if it fits and shortened (AD type 0x08) otherwise.
/// On a controller with legacy advertising only (such as the emulated ones in Able's test
/// guest) each holds 31 bytes. ``Adapter/startAdvertising(_:)`` checks an advertisement against
/// the adapter's ``AdvertisingCapabilities`` before it asks BlueZ.
///
/// The advertising flags are BlueZ's to set: general discoverable (``isDiscoverable``) or not,
/// and BR/EDR not supported on an LE-only adapter. BlueZ offers no limited discoverable mode
/// for an advertisement, and a non-connectable (`broadcast`) advertisement carries no flags
/// (BlueZ 5.82 refuses a discoverable one).
public struct Advertisement: Sendable, Hashable {
    /// The name to advertise, or `nil` for none; it goes into the scan response, shortened
    /// (AD type 0x08, "Shortened Local Name") when it does not fit whole.
    public var localName: String?
    /// The services to advertise.
    public var serviceUUIDs: [BluetoothUUID]
    /// The services this device asks centrals to offer (Service Solicitation).
    public var solicitedUUIDs: [BluetoothUUID]
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
    /// The scan response's own fields: service UUIDs, solicited UUIDs, service data and
    /// manufacturer data (BlueZ 5.80 and later, with `bluetoothd -E`; see
    /// ``AdvertisingCapabilities/supportsScanResponseData``). Empty by default.
    public var scanResponse: AdvertisementData
    /// The advertising interval range, 20 ms to 10485.759 s, or `nil` for the controller's default.
    public var interval: ClosedRange<Duration>?
    /// The TX power to ask the controller for, in dBm (-127...20), or `nil` for its default.
    public var txPower: Int?
    /// The secondary advertising channel for extended advertising, or `nil` to let BlueZ choose
    /// (legacy advertising when the data fits 31 bytes).
    public var secondaryChannel: AdvertisingPHY?

    /// An advertisement; by default discoverable and connectable, with nothing but the flags.
    public init(
        localName: String? = nil, serviceUUIDs: [BluetoothUUID] = [], manufacturerData: [UInt16: [UInt8]] = [:],
        serviceData: [BluetoothUUID: [UInt8]] = [:], appearance: UInt16? = nil, includesTxPower: Bool = false,
        isDiscoverable: Bool = true, isConnectable: Bool = true, timeout: Duration? = nil, duration: Duration? = nil,
        solicitedUUIDs: [BluetoothUUID] = [], scanResponse: AdvertisementData = AdvertisementData(),
        interval: ClosedRange<Duration>? = nil, txPower: Int? = nil, secondaryChannel: AdvertisingPHY? = nil
    ) {
        self.localName = localName
        self.serviceUUIDs = serviceUUIDs
        self.solicitedUUIDs = solicitedUUIDs
        self.manufacturerData = manufacturerData
        self.serviceData = serviceData
        self.appearance = appearance
        self.includesTxPower = includesTxPower
        self.isDiscoverable = isDiscoverable
        self.isConnectable = isConnectable
        self.timeout = timeout
        self.duration = duration
        self.scanResponse = scanResponse
        self.interval = interval
        self.txPower = txPower
        self.secondaryChannel = secondaryChannel
    }

    /// The bytes of advertising data this advertisement would need with the name in it, the
    /// 3-byte flags included; ``layout`` says what BlueZ actually puts where.
    public var legacyLength: Int {
        let data = AdvertisementData(
            localName: localName, serviceUUIDs: serviceUUIDs, manufacturerData: manufacturerData,
            serviceData: serviceData,
            txPowerLevel: includesTxPower ? 0 : nil, appearance: appearance)
        return data.encodedLength + 3
    }

    /// Checks that the advertisement fits legacy advertising, as an adapter with one free
    /// instance and 31 bytes each of advertising data and scan response would take it.
    ///
    /// - Throws: ``BluetoothError`` as ``validate(against:)`` does.
    public func validateLegacyLength() throws {
        try validate(
            against: AdvertisingCapabilities(
                availableInstances: 1, supportsParameters: true, supportsScanResponseData: true))
    }

    /// The data a scanner receives: the advertising data merged with the scan response, as
    /// BlueZ reports it (the flags are left out: BlueZ sets them).
    public var advertisedData: AdvertisementData {
        var data = AdvertisementData(
            localName: localName, serviceUUIDs: serviceUUIDs, solicitedUUIDs: solicitedUUIDs,
            manufacturerData: manufacturerData, serviceData: serviceData, appearance: appearance)
        for uuid in scanResponse.serviceUUIDs where !data.serviceUUIDs.contains(uuid) { data.serviceUUIDs.append(uuid) }
        for uuid in scanResponse.solicitedUUIDs where !data.solicitedUUIDs.contains(uuid) {
            data.solicitedUUIDs.append(uuid)
        }
        data.manufacturerData.merge(scanResponse.manufacturerData) { $1 }
        data.serviceData.merge(scanResponse.serviceData) { $1 }
        return data
    }
}

/// A running advertisement, from ``Adapter/startAdvertising(_:)``: ``update(_:)`` changes it
/// on air, ``stop()`` ends it.
///
/// A set outlives the Bluetooth stack under it. When `bluetoothd` stops or restarts, or the
/// adapter is removed, BlueZ forgets the registration and the advertisement goes off the air;
/// the set stays active and, once the adapter is back, registers again by itself with what it
/// advertised last, so that a gateway's advertisement returns with the stack and its
/// ``GATTServer``. Only BlueZ ending the set on purpose (its ``Advertisement/timeout`` or
/// ``Advertisement/duration`` ran out) or ``stop()`` ends it.
///
/// The corresponding BlueZ method is `org.bluez.LEAdvertisingManager1.RegisterAdvertisement`,
/// called again once the adapter's `LEAdvertisingManager1` is back on the bus.
public actor AdvertisingSet {
    let stopAction: @Sendable () async -> Void
    let updateAction: (@Sendable (Advertisement) async throws -> Void)?
    let released: ReleaseFlag

    /// What the set advertises now.
    public private(set) var advertisement: Advertisement

    package init(
        _ advertisement: Advertisement, released: ReleaseFlag,
        update: (@Sendable (Advertisement) async throws -> Void)? = nil, stop: @escaping @Sendable () async -> Void
    ) {
        self.advertisement = advertisement
        self.released = released
        self.updateAction = update
        self.stopAction = stop
    }

    package init(released: ReleaseFlag, stop: @escaping @Sendable () async -> Void) {
        self.init(Advertisement(), released: released, stop: stop)
    }

    private var stopped = false

    /// Whether the advertisement is still on air: not stopped, and not released by BlueZ (for
    /// example after its ``Advertisement/timeout``). It stays `true` through a gap in the stack
    /// (`bluetoothd` restarting), after which the set registers again by itself.
    public var isActive: Bool { !stopped && !released.value }

    /// Changes what the set advertises, without stopping it.
    ///
    /// The new advertisement is checked like ``Adapter/startAdvertising(_:)`` checks one (the
    /// set's own instance counts as free). Data (name, UUIDs, service and manufacturer data,
    /// appearance, TX power inclusion, discoverability, connectability) changes on air: BlueZ
    /// follows the advertisement object's `PropertiesChanged` and sends the new data from its
    /// next advertising event. A change of the parameters (timeout, duration, interval, TX
    /// power, secondary channel) or of which fields are present registers the set again with
    /// BlueZ, which leaves the air silent for a moment.
    ///
    /// The corresponding BlueZ signal is `org.freedesktop.DBus.Properties.PropertiesChanged` on
    /// the `org.bluez.LEAdvertisement1` object; for a new registration,
    /// `org.bluez.LEAdvertisingManager1.UnregisterAdvertisement` and `RegisterAdvertisement`.
    /// - Parameter advertisement: What to advertise from now on.
    /// - Throws: ``BluetoothError``: what ``Adapter/startAdvertising(_:)`` throws, and
    ///   ``BluetoothError/Code/notAvailable`` when the set is no longer active. A refused new
    ///   registration ends the set (``isActive`` is then `false`); a refused check leaves it as it was.
    public func update(_ advertisement: Advertisement) async throws {
        guard isActive else {
            throw BluetoothError(.notAvailable, message: "the advertising set was stopped or released by BlueZ")
        }
        guard let updateAction else {
            throw BluetoothError(.unsupported, message: "this backend cannot update a running advertisement")
        }
        try await updateAction(advertisement)
        self.advertisement = advertisement
    }

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
