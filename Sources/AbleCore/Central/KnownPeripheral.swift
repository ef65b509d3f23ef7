/// A device the adapter remembers: one it has seen in a scan, connected to or bonded with.
///
/// BlueZ keeps bonded devices across restarts (in its storage directory) and forgets devices it
/// merely saw a few minutes after they stop advertising; a simulated radio remembers what its
/// adapter saw, connected to or paired with until ``Peripheral/forget()``.
public struct KnownPeripheral: Sendable, Hashable, CustomStringConvertible {
    /// The device's address.
    public var address: BluetoothAddress
    /// Whether the address is public or random.
    public var addressType: BluetoothAddress.AddressType
    /// The device's name (BlueZ's `Alias`: its advertised or GAP name unless set locally), when known.
    public var name: String?
    /// Whether pairing with it completed (BlueZ's `Paired`), bonded or not.
    public var isPaired: Bool
    /// Whether its keys are stored, so that a later connection is encrypted without pairing again
    /// (BlueZ's `Bonded`).
    public var isBonded: Bool
    /// Whether it may connect and use services without being authorized each time (BlueZ's `Trusted`).
    public var isTrusted: Bool
    /// Whether every connection from or to it is refused (BlueZ's `Blocked`).
    public var isBlocked: Bool
    /// Whether it is connected now.
    public var isConnected: Bool

    /// A known device with the given properties.
    public init(
        address: BluetoothAddress, addressType: BluetoothAddress.AddressType = .public, name: String? = nil,
        isPaired: Bool = false, isBonded: Bool = false, isTrusted: Bool = false, isBlocked: Bool = false,
        isConnected: Bool = false
    ) {
        self.address = address
        self.addressType = addressType
        self.name = name
        self.isPaired = isPaired
        self.isBonded = isBonded
        self.isTrusted = isTrusted
        self.isBlocked = isBlocked
        self.isConnected = isConnected
    }

    public var description: String {
        let flags = [
            isPaired ? "paired" : nil, isBonded ? "bonded" : nil, isTrusted ? "trusted" : nil,
            isBlocked ? "blocked" : nil, isConnected ? "connected" : nil,
        ].compactMap { $0 }
        return "\(address) (\(addressType))" + (name.map { " \($0)" } ?? "")
            + (flags.isEmpty ? "" : " [" + flags.joined(separator: ", ") + "]")
    }
}

/// A device added to or removed from what an adapter remembers: what
/// ``Adapter/knownPeripheralEvents()`` delivers.
public enum KnownPeripheralEvent: Sendable, Hashable, CustomStringConvertible {
    /// The adapter now knows the device: it was known when the stream began, a scan found it, a
    /// connection or bond created it.
    case added(KnownPeripheral)
    /// The adapter forgot the device (``Peripheral/forget()``, or BlueZ dropping a device it saw
    /// but never bonded with).
    case removed(BluetoothAddress)

    public var description: String {
        switch self {
        case .added(let peripheral): "added \(peripheral)"
        case .removed(let address): "removed \(address)"
        }
    }
}

/// What a backend provides for the devices an adapter knows.
package protocol KnownPeripheralsBackend: AdapterBackend {
    func knownPeripherals() -> [KnownPeripheral]
    func knownPeripheralEvents() -> AsyncStream<KnownPeripheralEvent>
}

/// What a backend provides for a peripheral's bond and its trust.
package protocol BondBackend: PeripheralBackend {
    var knownPeripheral: KnownPeripheral? { get }
    func setTrusted(_ trusted: Bool) async throws
    func setBlocked(_ blocked: Bool) async throws
    func forget() async throws
}

extension Adapter {
    /// The devices the adapter remembers now, sorted by address: paired or bonded ones, those
    /// connected and those a scan found recently.
    ///
    /// Connecting to one of them needs no scan: `try await adapter.peripheral(address:).connect()`.
    ///
    /// The corresponding BlueZ objects are the `org.bluez.Device1` objects below the adapter (Able
    /// follows them; nothing is asked of BlueZ per call).
    public func knownPeripherals() throws -> [KnownPeripheral] {
        try knownPeripheralsBackend().knownPeripherals()
    }

    /// The devices the adapter remembers being added and removed: `.added` for every one known
    /// now, then each change.
    ///
    /// Buffering: every event is kept until consumed (a scan adds each new device once).
    /// Cancelling the task that iterates ends the stream and stops the watching behind it.
    public func knownPeripheralEvents() throws -> AsyncStream<KnownPeripheralEvent> {
        try knownPeripheralsBackend().knownPeripheralEvents()
    }

    private func knownPeripheralsBackend() throws -> any KnownPeripheralsBackend {
        guard let backend = backend as? any KnownPeripheralsBackend else {
            throw BluetoothError(.unsupported, message: "this backend does not list known devices")
        }
        return backend
    }
}

extension Peripheral {
    /// What the adapter remembers of the peripheral now, or `nil` when it does not know it.
    public var known: KnownPeripheral? { (backend as? any BondBackend)?.knownPeripheral }

    /// Whether the peripheral's keys are stored, so that later connections are encrypted without
    /// pairing again (BlueZ's `org.bluez.Device1.Bonded`).
    public var isBonded: Bool { known?.isBonded == true }

    /// Whether the peripheral is trusted (BlueZ's `org.bluez.Device1.Trusted`).
    public var isTrusted: Bool { known?.isTrusted == true }

    /// Whether the peripheral is blocked: every connection to or from it is refused (BlueZ's
    /// `org.bluez.Device1.Blocked`).
    public var isBlocked: Bool { known?.isBlocked == true }

    /// Trusts the peripheral, or stops trusting it.
    ///
    /// The corresponding BlueZ property is `org.bluez.Device1.Trusted`.
    /// - Throws: ``BluetoothError/Code/doesNotExist`` when the adapter does not know the peripheral.
    public func setTrusted(_ trusted: Bool) async throws {
        try await bondBackend().setTrusted(trusted)
    }

    /// Blocks the peripheral, or unblocks it. Blocking disconnects it and refuses its connections.
    ///
    /// The corresponding BlueZ property is `org.bluez.Device1.Blocked`.
    /// - Throws: ``BluetoothError/Code/doesNotExist`` when the adapter does not know the peripheral.
    public func setBlocked(_ blocked: Bool) async throws {
        try await bondBackend().setBlocked(blocked)
    }

    /// Forgets the peripheral: disconnects it, and deletes its bond and its cached GATT database.
    /// The next connection needs a scan (or an address BlueZ finds) and pairing again.
    ///
    /// The corresponding BlueZ method is `org.bluez.Adapter1.RemoveDevice`.
    /// - Throws: ``BluetoothError/Code/doesNotExist`` when the adapter does not know the peripheral.
    public func forget() async throws {
        try await bondBackend().forget()
    }

    private func bondBackend() throws -> any BondBackend {
        guard let backend = backend as? any BondBackend else {
            throw BluetoothError(.unsupported, message: "this backend does not keep bonds")
        }
        return backend
    }
}
