/// What an adapter can advertise: its free advertising instances, how many bytes its
/// advertising and scan response data hold, and which parameters the running BlueZ and the
/// controller let a caller choose.
///
/// ``Adapter/startAdvertising(_:)`` checks every ``Advertisement`` against these before it asks
/// BlueZ, and refuses what does not fit or is not supported with a ``BluetoothError`` that names
/// the limit.
///
/// The corresponding BlueZ properties are those of `org.bluez.LEAdvertisingManager1`:
/// `SupportedInstances`, `ActiveInstances`, `SupportedIncludes`, `SupportedSecondaryChannels`,
/// `SupportedCapabilities` (`MaxAdvLen`, `MaxScnRspLen`, `MinTxPower`, `MaxTxPower`) and
/// `SupportedFeatures`. BlueZ 5.66 shows the last two only when `bluetoothd` runs with its
/// experimental interfaces (`-E`), and only then honours an advertisement's interval and TX
/// power; from BlueZ 5.77 they are always there.
public struct AdvertisingCapabilities: Sendable, Hashable, CustomStringConvertible {
    /// How many more advertising sets the adapter can run now (BlueZ's `SupportedInstances`,
    /// which counts the instances still free).
    public var availableInstances: Int
    /// How many advertising sets run now, from every process (BlueZ's `ActiveInstances`).
    public var activeInstances: Int
    /// The most bytes of advertising data one set can carry: 31 on a controller with legacy
    /// advertising only, more with extended advertising.
    public var maximumAdvertisingDataLength: Int
    /// The most bytes of scan response data one set can carry.
    public var maximumScanResponseLength: Int
    /// The advertising TX power the controller can be asked for, in dBm, when it says.
    public var txPowerRange: ClosedRange<Int>?
    /// What BlueZ can add to the data itself (`SupportedIncludes`), such as the TX power.
    public var includes: Set<Include>
    /// The PHYs the controller can use as secondary advertising channel, for extended advertising.
    public var secondaryChannels: Set<AdvertisingPHY>
    /// Whether each set can ask for its own TX power (BlueZ's `CanSetTxPower` feature).
    public var canSetTxPower: Bool
    /// Whether BlueZ honours an advertisement's interval range and TX power request.
    public var supportsParameters: Bool
    /// Whether BlueZ honours a scan response's own fields (service UUIDs, solicited UUIDs,
    /// service and manufacturer data): BlueZ 5.80 or later with its experimental interfaces
    /// (`bluetoothd -E`). The local name goes into the scan response on every version.
    public var supportsScanResponseData: Bool
    /// Whether BlueZ switches to extended advertising by itself when the data is longer than 31
    /// bytes (BlueZ 5.77 and later); otherwise longer data needs a ``Advertisement/secondaryChannel``.
    public var extendsAutomatically: Bool

    /// Describes an adapter's advertising capabilities.
    public init(
        availableInstances: Int, activeInstances: Int = 0,
        maximumAdvertisingDataLength: Int = AdvertisementData.legacyMaximumLength,
        maximumScanResponseLength: Int = AdvertisementData.legacyMaximumLength, txPowerRange: ClosedRange<Int>? = nil,
        includes: Set<Include> = [.txPower, .appearance, .localName], secondaryChannels: Set<AdvertisingPHY> = [],
        canSetTxPower: Bool = false, supportsParameters: Bool = false, supportsScanResponseData: Bool = false,
        extendsAutomatically: Bool = false
    ) {
        self.availableInstances = availableInstances
        self.activeInstances = activeInstances
        self.maximumAdvertisingDataLength = maximumAdvertisingDataLength
        self.maximumScanResponseLength = maximumScanResponseLength
        self.txPowerRange = txPowerRange
        self.includes = includes
        self.secondaryChannels = secondaryChannels
        self.canSetTxPower = canSetTxPower
        self.supportsParameters = supportsParameters
        self.supportsScanResponseData = supportsScanResponseData
        self.extendsAutomatically = extendsAutomatically
    }

    public var description: String {
        var parts = [
            "\(availableInstances) free instance(s), \(activeInstances) active",
            "advertising data \(maximumAdvertisingDataLength) B, scan response \(maximumScanResponseLength) B",
        ]
        if let txPowerRange { parts.append("TX power \(txPowerRange.lowerBound)...\(txPowerRange.upperBound) dBm") }
        parts.append("includes [\(includes.map(\.rawValue).sorted().joined(separator: ", "))]")
        if !secondaryChannels.isEmpty {
            parts.append("secondary channels [\(secondaryChannels.map(\.rawValue).sorted().joined(separator: ", "))]")
        }
        if canSetTxPower { parts.append("per-set TX power") }
        if supportsParameters { parts.append("interval and TX power parameters") }
        if supportsScanResponseData { parts.append("scan response data") }
        return parts.joined(separator: "; ")
    }

    /// What BlueZ can add to advertising data by itself (`SupportedIncludes`).
    public struct Include: RawRepresentable, Sendable, Hashable {
        /// BlueZ's name for it, such as `tx-power`.
        public let rawValue: String
        /// Creates an include from BlueZ's name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The TX power level (`tx-power`), as ``Advertisement/includesTxPower`` asks.
        public static let txPower = Include(rawValue: "tx-power")
        /// The appearance (`appearance`).
        public static let appearance = Include(rawValue: "appearance")
        /// The local name (`local-name`).
        public static let localName = Include(rawValue: "local-name")
        /// The resolvable set identifier (`rsi`, BlueZ 5.67 and later).
        public static let rsi = Include(rawValue: "rsi")
    }
}

/// A physical layer an extended advertisement's secondary channel can use (BlueZ's
/// `SecondaryChannel` values).
public struct AdvertisingPHY: RawRepresentable, Sendable, Hashable {
    /// BlueZ's name for it: `1M`, `2M` or `Coded`.
    public let rawValue: String
    /// Creates a PHY from BlueZ's name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// LE 1M.
    public static let le1M = AdvertisingPHY(rawValue: "1M")
    /// LE 2M.
    public static let le2M = AdvertisingPHY(rawValue: "2M")
    /// LE Coded (long range; the primary channel is then Coded too).
    public static let leCoded = AdvertisingPHY(rawValue: "Coded")
}

extension Advertisement {
    /// How many bytes of advertising and scan response data BlueZ builds for this advertisement.
    ///
    /// BlueZ puts the flags (3 bytes, for a connectable advertisement), service and solicited
    /// UUID lists, service data, appearance, the TX power (when included) and manufacturer
    /// data into the advertising data, and the local name, after the scan response's own
    /// fields, into the scan response, shortened to what fits there.
    public struct Layout: Sendable, Hashable {
        /// The bytes of advertising data.
        public var advertisingDataLength: Int
        /// The bytes of scan response data, the local name counted in full.
        public var scanResponseLength: Int
        /// The bytes of the scan response's fields, without the local name.
        public var scanResponseFieldsLength: Int
    }

    /// How many bytes this advertisement takes; see ``Layout``.
    public var layout: Layout {
        var advertising = AdvertisementData(
            serviceUUIDs: serviceUUIDs, solicitedUUIDs: solicitedUUIDs, manufacturerData: manufacturerData,
            serviceData: serviceData, txPowerLevel: includesTxPower ? 0 : nil, appearance: appearance)
        if isConnectable { advertising.flags = [.generalDiscoverable] }
        let fields = AdvertisementData(
            serviceUUIDs: scanResponse.serviceUUIDs, solicitedUUIDs: scanResponse.solicitedUUIDs,
            manufacturerData: scanResponse.manufacturerData, serviceData: scanResponse.serviceData
        ).encodedLength
        let name = localName.map { $0.utf8.isEmpty ? 0 : 2 + $0.utf8.count } ?? 0
        return Layout(
            advertisingDataLength: advertising.encodedLength, scanResponseLength: fields + name,
            scanResponseFieldsLength: fields)
    }

    /// Checks that the adapter can advertise this, as BlueZ would, before BlueZ is asked.
    ///
    /// - Parameter capabilities: What the adapter reports, from ``Adapter/advertisingCapabilities()``.
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/valueTooLong`` when the data or
    ///   the scan response does not fit (saying the bytes used and available),
    ///   ``BluetoothError/Code/notSupported`` when it asks for what the adapter or the running
    ///   BlueZ cannot do (naming it), ``BluetoothError/Code/invalidArguments`` for values outside
    ///   their ranges, and ``BluetoothError/Code/notAvailable`` when no advertising instance is free.
    public func validate(against capabilities: AdvertisingCapabilities) throws {
        try validateValues()
        let layout = self.layout
        if let secondaryChannel, !capabilities.secondaryChannels.contains(secondaryChannel) {
            throw BluetoothError(
                .notSupported,
                message: "the controller offers no \(secondaryChannel.rawValue) secondary channel (it offers "
                    + "\(capabilities.secondaryChannels.isEmpty ? "none: legacy advertising only" : capabilities.secondaryChannels.map(\.rawValue).sorted().joined(separator: ", ")))"
            )
        }
        let extended =
            secondaryChannel != nil
            || (capabilities.extendsAutomatically && !capabilities.secondaryChannels.isEmpty)
        let available =
            extended
            ? capabilities.maximumAdvertisingDataLength
            : min(
                capabilities.maximumAdvertisingDataLength, AdvertisementData.legacyMaximumLength)
        if layout.advertisingDataLength > available {
            var hint = " (shorten the data, advertise fewer or 16-bit UUIDs, or move fields to the scan response)"
            if !extended, capabilities.maximumAdvertisingDataLength > AdvertisementData.legacyMaximumLength {
                hint =
                    " with legacy advertising; choose a secondary channel for extended advertising, up to "
                    + "\(capabilities.maximumAdvertisingDataLength) bytes"
            }
            throw BluetoothError(
                .valueTooLong,
                message: "the advertising data needs \(layout.advertisingDataLength) bytes; \(available) are available"
                    + hint)
        }
        if includesTxPower, !capabilities.includes.contains(.txPower) {
            throw BluetoothError(
                .notSupported, message: "the adapter cannot include the TX power (no tx-power include)")
        }
        if layout.scanResponseFieldsLength > 0 {
            guard capabilities.supportsScanResponseData else {
                throw BluetoothError(
                    .notSupported,
                    message: "this BlueZ takes no scan response data besides the local name (it needs BlueZ 5.80 or "
                        + "later with experimental interfaces, bluetoothd -E)")
            }
            if extended, isConnectable {
                throw BluetoothError(
                    .notSupported,
                    message: "an extended connectable advertisement has no scan response (BlueZ then uses extended "
                        + "advertising, which cannot be connectable and scannable at once)")
            }
        }
        // The name is shortened to what fits; the fields must fit with at least a shortened name.
        let nameRoom = localName == nil ? 0 : 3
        if layout.scanResponseFieldsLength + nameRoom > capabilities.maximumScanResponseLength {
            throw BluetoothError(
                .valueTooLong,
                message: "the scan response needs \(layout.scanResponseFieldsLength + nameRoom) bytes"
                    + (nameRoom > 0 ? " (with a name of one byte)" : "")
                    + "; \(capabilities.maximumScanResponseLength) are available")
        }
        if interval != nil || txPower != nil, !capabilities.supportsParameters {
            throw BluetoothError(
                .notSupported,
                message: "this BlueZ ignores advertising intervals and TX power requests (BlueZ 5.66 honours them "
                    + "only with experimental interfaces, bluetoothd -E; 5.77 and later always)")
        }
        if let txPower {
            guard capabilities.canSetTxPower else {
                throw BluetoothError(
                    .notSupported, message: "the adapter cannot set a TX power per advertising set (no CanSetTxPower)")
            }
            if let range = capabilities.txPowerRange, !range.contains(txPower) {
                throw BluetoothError(
                    .invalidArguments,
                    message:
                        "TX power \(txPower) dBm is outside the controller's \(range.lowerBound)...\(range.upperBound) dBm"
                )
            }
        }
        guard capabilities.availableInstances > 0 else {
            throw BluetoothError(
                .notAvailable,
                message: "no free advertising instance: \(capabilities.activeInstances) advertising set(s) run and the "
                    + "adapter has no more")
        }
    }

    /// Checks the values that are wrong whatever the adapter.
    func validateValues() throws {
        if let interval {
            let range = Duration.milliseconds(20)...Duration.milliseconds(10_485_759)
            guard range.contains(interval.lowerBound), range.contains(interval.upperBound) else {
                throw BluetoothError(
                    .invalidArguments, message: "the advertising interval \(interval) is outside 20 ms...10485.759 s")
            }
        }
        if let txPower, !(-127...20).contains(txPower) {
            throw BluetoothError(.invalidArguments, message: "TX power \(txPower) dBm is outside -127...20 dBm")
        }
        for duration in [timeout, self.duration].compactMap({ $0 }) {
            guard duration >= .seconds(1), duration <= .seconds(Int(UInt16.max)) else {
                throw BluetoothError(
                    .invalidArguments, message: "a timeout or duration of \(duration) is outside 1...65535 s")
            }
        }
        if scanResponse.localName != nil || scanResponse.txPowerLevel != nil || scanResponse.appearance != nil
            || scanResponse.flags != nil
        {
            throw BluetoothError(
                .invalidArguments,
                message: "a scan response carries service and solicited UUIDs, service data and manufacturer data; "
                    + "set the name, appearance and TX power on the advertisement (BlueZ puts the name in the scan response)"
            )
        }
    }
}
