public import AbleCore
import AbleIO

/// A device on a ``SimulatedRadio``, as the test drives it: its notifications, its timing, and
/// the faults it shows the central.
///
/// Each fault is one call, and applies to what happens after it:
///
/// ```swift
/// let peripheral = radio.addPeripheral(address: "C0:FF:EE:00:00:01", advertisement: Advertisement(localName: "HRM"))
/// peripheral.failNextConnection(.leConnectionAbortByLocal)
/// peripheral.neverResolveServices()
/// peripheral.dropLinkDuringNextRequest()
/// peripheral.failNextRequest(with: .insufficientAuthentication)
/// peripheral.dropNotifications(2)
/// peripheral.delayNotifications(by: .milliseconds(300))
/// peripheral.goOutOfRange()
/// peripheral.changeServices { Service(.batteryService) { Characteristic(.batteryLevel, properties: .read) } }
/// ```
public final class SimulatedPeripheral: Sendable {
    /// How long a simulated peripheral takes, in simulated time.
    public struct Timing: Sendable, Hashable {
        /// From a scan's start (or the advertising's) to the scan seeing the peripheral.
        public var advertisingInterval: Duration
        /// From `connect` to the link being up.
        public var connectionTime: Duration
        /// From the link being up to the services being resolved.
        public var serviceResolutionTime: Duration

        /// The given timing; by default 100 ms of advertising interval, 30 ms to connect and
        /// 20 ms to resolve the services.
        public init(
            advertisingInterval: Duration = .milliseconds(100), connectionTime: Duration = .milliseconds(30),
            serviceResolutionTime: Duration = .milliseconds(20)
        ) {
            self.advertisingInterval = advertisingInterval
            self.connectionTime = connectionTime
            self.serviceResolutionTime = serviceResolutionTime
        }
    }

    /// Why a simulated connection attempt fails: the ``/Able/BluetoothError`` that `connect`
    /// throws, by code and message.
    ///
    /// The presets are the failures a gateway meets most, with the code and text that the BlueZ
    /// backend reports for them, so that code written against the simulator handles them as it
    /// will on a real adapter.
    public struct ConnectionFailure: Sendable, Hashable {
        /// The error's code, such as ``/Able/BluetoothError/Code/connectionAttemptFailed``.
        public var code: BluetoothError.Code
        /// The error's message, for people.
        public var message: String

        /// A failure that throws a ``/Able/BluetoothError`` with `code` and `message`.
        ///
        /// - Parameters:
        ///   - code: The code of the error that `connect` throws.
        ///   - message: The error's message, for people.
        public init(_ code: BluetoothError.Code, message: String) {
            self.code = code
            self.message = message
        }

        /// The controller gave up on the connection
        /// (``/Able/BluetoothError/Code/connectionAttemptFailed``, with BlueZ's reason
        /// `le-connection-abort-by-local` as message): the most common connection failure, often
        /// from a peripheral that stopped advertising.
        public static let leConnectionAbortByLocal = ConnectionFailure(
            .connectionAttemptFailed, message: "le-connection-abort-by-local")

        /// Another connection attempt to the device is under way
        /// (``/Able/BluetoothError/Code/inProgress``).
        public static let inProgress = ConnectionFailure(.inProgress, message: "In Progress")

        /// The kernel aborted the connection attempt (``/Able/BluetoothError/Code/failed``, with
        /// the text of `ECONNABORTED`, `Software caused connection abort`, as BlueZ reports it);
        /// ``/Able/ReconnectPolicy`` counts it as transient.
        public static let softwareAbort = ConnectionFailure(.failed, message: "Software caused connection abort")

        /// The error that `connect` throws for this failure.
        var error: BluetoothError {
            BluetoothError(code, message: message)
        }
    }

    let radio: SimulatedRadio
    /// The peripheral's address.
    public let address: BluetoothAddress

    init(radio: SimulatedRadio, address: BluetoothAddress) {
        self.radio = radio
        self.address = address
    }

    /// Notifies a characteristic's subscribers of a new value, as the peripheral's firmware would.
    ///
    /// The value is delivered whole, whatever the link's MTU: keep it within the ATT MTU less 3
    /// bytes, as firmware must. Nothing happens when the peripheral has no such characteristic.
    /// - Parameters:
    ///   - identifier: The characteristic, with its service.
    ///   - value: The new value.
    public func notify(_ identifier: some CharacteristicIdentifier, value: [UInt8]) {
        guard let core = radio.state.withLock({ $0.devices[address]?.core }),
            let id = core.characteristic(identifier.uuid, service: identifier.service.uuid)
        else { return }
        core.store(value, for: id)
        radio.deliver(value, from: address, attribute: id)
    }

    /// Drops every connection to the peripheral, as when it goes out of range for a moment; it
    /// keeps advertising.
    ///
    /// - Parameter reason: Why the link ends, as the centrals hear it in
    ///   ``/Able/Peripheral/ConnectionState/disconnected(reason:)``:
    ///   ``/Able/BluetoothError/Code/linkTimeout`` (out of range, the default),
    ///   ``/Able/BluetoothError/Code/peerDisconnected`` (the peripheral ended the link),
    ///   ``/Able/BluetoothError/Code/authenticationFailed``, or any other code, with the message
    ///   BlueZ 5.83 and later give that reason.
    public func disconnectAll(reason: BluetoothError.Code = .linkTimeout) {
        disconnectAll(because: .linkEnded(reason))
    }

    private func disconnectAll(because reason: BluetoothError) {
        for central in radio.state.withLock({ $0.connections.filter { $0.peripheral == address }.map(\.central) }) {
            radio.disconnect(central: central, peripheral: address, reason: reason)
        }
    }

    /// Takes the peripheral out of range: every connection drops (with
    /// ``/Able/BluetoothError/Code/linkTimeout``), scans stop seeing it, and connecting fails, until
    /// ``comeBackInRange()``.
    public func goOutOfRange() {
        radio.state.withLock { $0.devices[address]?.isInRange = false }
        disconnectAll(because: BluetoothError(.linkTimeout, message: "the peripheral went out of range"))
    }

    /// Brings the peripheral back in range; scans see it again one advertising interval later.
    public func comeBackInRange() {
        radio.state.withLock { $0.devices[address]?.isInRange = true }
        radio.announce(address)
    }

    /// Makes the next connection attempt fail, after the connection time: `connect` throws a
    /// ``/Able/BluetoothError`` with the failure's code and message.
    ///
    /// ```swift
    /// let peripheral = radio.addPeripheral(address: "C0:FF:EE:00:00:01", advertisement: Advertisement(localName: "HRM"))
    /// peripheral.failNextConnection(.leConnectionAbortByLocal)
    /// peripheral.failNextConnection(.init(.connectionAttemptFailed, message: "le-connection-refused"))
    /// ```
    ///
    /// - Parameter failure: The failure, one of the presets such as
    ///   ``ConnectionFailure/leConnectionAbortByLocal`` or any code and message.
    public func failNextConnection(_ failure: ConnectionFailure) {
        radio.state.withLock { $0.devices[address]?.connectFailure = failure }
    }

    /// Makes connections come up without their services ever being resolved, so that
    /// ``/Able/Peripheral/connect(timeout:)`` times out; ``resolveServices()`` undoes it.
    public func neverResolveServices() {
        radio.state.withLock { $0.devices[address]?.servicesResolve = false }
    }

    /// Lets connections resolve their services again.
    public func resolveServices() {
        radio.state.withLock { $0.devices[address]?.servicesResolve = true }
    }

    /// Makes the link drop while the next GATT request (read or write) is in flight: the request
    /// throws ``/Able/BluetoothError/Code/disconnected``, as do the notification streams.
    public func dropLinkDuringNextRequest() {
        radio.state.withLock { $0.devices[address]?.dropLinkOnNextRequest = true }
    }

    /// Makes the peripheral answer the next GATT request (read or write) with an ATT error.
    public func failNextRequest(with error: ATTError) {
        radio.state.withLock { $0.devices[address]?.nextRequestError = error }
    }

    /// Loses the next `count` notifications or indications the peripheral sends.
    public func dropNotifications(_ count: Int) {
        radio.state.withLock { $0.devices[address]?.notificationsToDrop = max(0, count) }
    }

    /// Delivers the peripheral's notifications `delay` late, in simulated time; `.zero` undoes it.
    public func delayNotifications(by delay: Duration) {
        radio.state.withLock { $0.devices[address]?.notificationDelay = delay }
    }

    /// Replaces the peripheral's GATT database and handlers while centrals stay connected, as a
    /// firmware update that sends Service Changed does (or a BlueZ peripheral registering another
    /// GATT application).
    ///
    /// What a connected central sees, as on BlueZ: its ``/Able/Peripheral/serviceChanges()``
    /// streams report the change; ``/Able/Peripheral/services()`` gives the new database; a
    /// notification stream of a characteristic that is not there any more as it was (same
    /// service, UUID, properties and position) ends with
    /// ``/Able/BluetoothError/Code/attributeRemoved``, naming it, as do operations on a
    /// characteristic a ``/Able/Peripheral`` used before the change. The change is one event,
    /// as one Service Changed indication is on BlueZ.
    ///
    /// - Parameter services: The new database and handlers, as in ``SimulatedRadio/addPeripheral(address:addressType:advertisement:rssi:mtu:timing:services:)``.
    public func changeServices(@GATTServerBuilder _ services: () -> [any GATTServerComponent]) {
        radio.replaceDatabase(of: address, with: GATTServerCore(definition: GATTServerDefinition(services)))
    }

    /// Stops or restarts advertising.
    public func setAdvertising(_ advertising: Bool) {
        radio.state.withLock { $0.devices[address]?.isAdvertising = advertising }
        if advertising { radio.announce(address) }
    }

    /// Whether a central is connected.
    public var isConnected: Bool {
        radio.state.withLock { state in state.connections.contains { $0.peripheral == address } }
    }
}
