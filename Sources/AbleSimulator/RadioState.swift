import AbleCore

/// Everything on a simulated radio; kept behind the radio's mutex.
struct RadioState {
    struct Connection: Hashable, CustomStringConvertible {
        var central: BluetoothAddress
        var peripheral: BluetoothAddress
        var description: String { "\(central)→\(peripheral)" }
    }

    struct SubscriptionKey: Hashable, CustomStringConvertible {
        var central: BluetoothAddress
        var peripheral: BluetoothAddress
        var attribute: AttributeID
        var description: String { "\(central)→\(peripheral)#\(attribute.service).\(attribute.characteristic)" }
    }

    struct Scan {
        var adapter: BluetoothAddress
        var filter: ScanFilter
        var continuation: ScanStream.Continuation
        /// The clock's tokens of the deliveries scheduled for this scan, cancelled when it ends.
        var pendingDeliveries: [UInt64] = []
        /// The devices this scan has reported, to tell a new device from an update.
        var reported: Set<BluetoothAddress> = []
        /// The monitor's patterns of a passive scan.
        var passive: PassiveScanFilter?
    }

    /// A task waiting for an adapter's removal.
    struct AdapterWait {
        var adapter: BluetoothAddress
        /// Resumed when the adapter is removed; with `CancellationError` when the task is cancelled.
        var continuation: UnsafeContinuation<Void, any Error>
    }

    struct ListenerKey: Hashable {
        var adapter: BluetoothAddress
        var psm: PSM
    }

    struct Listener {
        var offer: L2CAPChannelOffer
        var options: L2CAPOptions
    }

    var adapterCount = 0
    var adapters: [BluetoothAddress: SimulatedAdapterState] = [:]
    var devices: [BluetoothAddress: SimulatedDevice] = [:]
    var connections: Set<Connection> = []
    var subscriptions: [SubscriptionKey: [UInt64: NotificationStream.Continuation]] = [:]
    var scans: [UInt64: Scan] = [:]
    var adapterListeners: [BluetoothAddress: [UInt64: AsyncStream<Adapter.State>.Continuation]] = [:]
    var connectionListeners: [Connection: [UInt64: AsyncStream<Peripheral.ConnectionState>.Continuation]] = [:]
    var serviceChangeListeners: [Connection: [UInt64: ServiceChangeListener]] = [:]
    var listeners: [ListenerKey: Listener] = [:]
    var channels: [UInt64: SimulatedL2CAPLink] = [:]
    var nextID: UInt64 = 0
    /// Lifecycle: listeners of adapters coming and going, and what each adapter remembers.
    var adapterEventListeners: [UInt64: AsyncStream<AdapterEvent>.Continuation] = [:]
    var knownDevices: [BluetoothAddress: [BluetoothAddress: KnownDeviceRecord]] = [:]
    var knownDeviceListeners: [BluetoothAddress: [UInt64: AsyncStream<KnownPeripheralEvent>.Continuation]] = [:]
    /// The addresses of removed adapters, by name, so that one made again under its name returns.
    var removedAdapters: [String: BluetoothAddress] = [:]
    /// Whether the simulated Bluetooth stack is down (``SimulatedRadio/stopStack()``): every
    /// adapter is away and calls fail with ``/Able/BluetoothError/Code/daemonUnavailable``.
    var isStackDown = false
    /// The adapters the stack had when it stopped, brought back by ``SimulatedRadio/startStack()``.
    var stoppedAdapters: [SimulatedAdapterState] = []
    /// What registered with the stack and must register again when it comes back: servers and
    /// advertising sets (``SimulatedRadio/addStackListener(_:)``).
    var stackListeners: [UInt64: StackListener] = [:]
    /// Connects waiting for their central's adapter to go (``SimulatedRadio/sleep(until:whileAdapterPresent:)``).
    var adapterWaits: [UInt64: AdapterWait] = [:]
    /// What happened, for ``SimulatedRadio/trace``.
    var trace = RadioTrace(limit: SimulatedRadio.defaultTraceLimit)

    /// The ATT MTU of a link: the smaller of what the central's adapter offers and what the
    /// peripheral offers, as an MTU exchange settles it (a central that offers nothing takes the
    /// peripheral's).
    func linkMTU(central: BluetoothAddress, peripheral: BluetoothAddress) -> Int {
        min(devices[peripheral]?.mtu ?? 23, adapters[central]?.mtu ?? .max)
    }

    /// The ATT MTU a simulated adapter offers as a peripheral: its own, or 23 (the ATT minimum).
    func serverMTU(of adapter: BluetoothAddress) -> Int { adapters[adapter]?.mtu ?? 23 }

    /// Why an absent adapter cannot be used: the stack is down, or the adapter was removed.
    func absence(of adapter: BluetoothAddress, _ message: String) -> BluetoothError {
        isStackDown
            ? BluetoothError(.daemonUnavailable, message: "the Bluetooth stack is down: " + message)
            : BluetoothError(.adapterRemoved, message: message)
    }

    mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }
}

/// A simulated adapter's state.
struct SimulatedAdapterState {
    var name: String
    var address: BluetoothAddress
    var alias: String = ""
    var isPowered = true
    var isDiscoverable = false
    var isPairable = true
    /// What the adapter's advertising can do, as the BlueZ it imitates reports it.
    var advertising = SimulatedRadio.defaultAdvertisingCapabilities
    /// The adapter's running advertising sets, oldest first: scans see the newest.
    var advertisingSets: [(id: UInt64, advertisement: Advertisement)] = []
    /// Whether the adapter offers passive scanning (BlueZ's advertisement monitor, `-E` only).
    var supportsPassiveScanning = false
    /// The standing agent that answers pairing on this adapter (``Adapter/setPairingAgent(_:asSystemDefault:)``).
    var pairingAgent: PairingAgent?
    /// Whether that agent asked for the system's default agent.
    var pairingAgentIsSystemDefault = false
    /// The ATT MTU the adapter offers in an MTU exchange (``SimulatedRadio/makeAdapter(name:address:mtu:)``);
    /// `nil` for the simulator's defaults.
    var mtu: Int?

    func publicState(discovering: Bool) -> Adapter.State {
        Adapter.State(
            name: name, address: address, systemName: name, alias: alias.isEmpty ? name : alias, isPowered: isPowered,
            isDiscoverable: isDiscoverable, isPairable: isPairable, isDiscovering: discovering, isPresent: true)
    }
}

/// A device others can find and connect to: a peripheral added by a test, or a simulated
/// adapter running a GATT server and advertising.
struct SimulatedDevice {
    var address: BluetoothAddress
    var addressType = BluetoothAddress.AddressType.public
    var advertisement: Advertisement?
    var rssi: Int
    var mtu: Int
    var core: GATTServerCore?
    var events: GATTServerEvents?
    var isAdvertising = true
    var isInRange = true
    var connectFailure: SimulatedPeripheral.ConnectionFailure?
    var paired: Set<BluetoothAddress> = []
    /// The centrals among ``paired`` whose keys came from pairing with man-in-the-middle
    /// protection (numeric comparison or passkey entry).
    var authenticated: Set<BluetoothAddress> = []
    var timing = SimulatedPeripheral.Timing()
    var servicesResolve = true
    var dropLinkOnNextRequest = false
    var nextRequestError: ATTError?
    var notificationsToDrop = 0
    var notificationDelay: Duration = .zero
    /// The link-quality fault (``SimulatedPeripheral/setLinkQuality(notificationLoss:missedConnectionEvents:connectionInterval:seed:)``).
    var linkQuality = SimulatedLinkQuality()
    /// When the last notification reaches its subscribers, so that a later one never overtakes it.
    var lastNotificationArrival: Duration = .zero
    /// How long the peripheral takes to answer a request (``SimulatedPeripheral/answerRequests(after:)``).
    var responseDelay: Duration = .zero

    var discovery: Discovery? {
        guard isAdvertising, isInRange, let advertisement else { return nil }
        var data = advertisement.advertisedData
        if let name = data.localName {
            // As BlueZ does: the name goes last into the scan response, shortened to what fits.
            let room = AdvertisementData.legacyMaximumLength - advertisement.layout.scanResponseFieldsLength - 2
            if name.utf8.count > room {
                data.localName = String(decoding: name.utf8.prefix(max(0, room)), as: UTF8.self)
            }
        }
        if advertisement.includesTxPower { data.txPowerLevel = advertisement.txPower ?? 0 }
        // As BlueZ sets them on an LE-only adapter.
        if advertisement.isConnectable {
            data.flags =
                advertisement.isDiscoverable ? [.generalDiscoverable, .bredrNotSupported] : [.bredrNotSupported]
        }
        return Discovery(address: address, addressType: addressType, rssi: rssi, advertisement: data)
    }
}
