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
/// peripheral.setLinkQuality(notificationLoss: 0.2, missedConnectionEvents: 0.1, seed: 7)
/// peripheral.answerRequests(after: .milliseconds(300))
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
        for central in radio.state.withLock({
            $0.connections.filter { $0.peripheral == address }.map(\.central).sorted()
        }) {
            radio.disconnect(central: central, peripheral: address, reason: reason)
        }
    }

    /// Takes the peripheral out of range: every connection drops (with
    /// ``/Able/BluetoothError/Code/linkTimeout``), scans stop seeing it, and connecting fails, until
    /// ``comeBackInRange()``.
    public func goOutOfRange() {
        radio.record(.fault, "\(address) out-of-range")
        radio.state.withLock { $0.devices[address]?.isInRange = false }
        disconnectAll(because: BluetoothError(.linkTimeout, message: "the peripheral went out of range"))
    }

    /// Brings the peripheral back in range; scans see it again one advertising interval later.
    public func comeBackInRange() {
        radio.record(.fault, "\(address) back-in-range")
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
        radio.record(.fault, "\(address) fail-next-connection \(failure.code): \(failure.message)")
        radio.state.withLock { $0.devices[address]?.connectFailure = failure }
    }

    /// Makes connections come up without their services ever being resolved, so that
    /// ``/Able/Peripheral/connect(timeout:)`` times out; ``resolveServices()`` undoes it.
    public func neverResolveServices() {
        radio.record(.fault, "\(address) never-resolve-services")
        radio.state.withLock { $0.devices[address]?.servicesResolve = false }
    }

    /// Lets connections resolve their services again.
    public func resolveServices() {
        radio.record(.fault, "\(address) resolve-services")
        radio.state.withLock { $0.devices[address]?.servicesResolve = true }
    }

    /// Makes the link drop while the next GATT request (read or write) is in flight: the request
    /// throws ``/Able/BluetoothError/Code/disconnected``, as do the notification streams.
    public func dropLinkDuringNextRequest() {
        radio.record(.fault, "\(address) drop-link-during-next-request")
        radio.state.withLock { $0.devices[address]?.dropLinkOnNextRequest = true }
    }

    /// Makes the peripheral answer the next GATT request (read or write) with an ATT error.
    public func failNextRequest(with error: ATTError) {
        radio.record(.fault, "\(address) fail-next-request \(error)")
        radio.state.withLock { $0.devices[address]?.nextRequestError = error }
    }

    /// Loses the next `count` notifications or indications the peripheral sends.
    public func dropNotifications(_ count: Int) {
        radio.record(.fault, "\(address) drop-notifications \(max(0, count))")
        radio.state.withLock { $0.devices[address]?.notificationsToDrop = max(0, count) }
    }

    /// Delivers the peripheral's notifications `delay` late, in simulated time; `.zero` undoes it.
    public func delayNotifications(by delay: Duration) {
        radio.record(.fault, "\(address) delay-notifications \(delay)")
        radio.state.withLock { $0.devices[address]?.notificationDelay = delay }
    }

    /// Makes the link to the peripheral lossy: a share of its notifications and indications is
    /// lost, and a share of connection events is missed, each missed event holding the next
    /// packet (a request, a response, a notification) one connection interval longer; all zero
    /// undoes it.
    ///
    /// The losses come from a generator seeded with `seed`, so a test sees the same notifications
    /// lost, and the same delays, on every run. Packets keep their order, as the link layer's
    /// retransmissions keep it, and one packet waits for at most six missed events (a link misses
    /// more only to time out, which ``disconnectAll(reason:)`` or ``goOutOfRange()`` show).
    ///
    /// ```swift
    /// let sensor = radio.peripheral("C0:FF:EE:00:00:01")
    /// sensor.setLinkQuality(notificationLoss: 0.2, seed: 7)
    /// ```
    ///
    /// - Parameters:
    ///   - notificationLoss: The share of notifications and indications lost, 0 to 1.
    ///   - missedConnectionEvents: The share of connection events the link misses, 0 to 1 (less
    ///     than 1: a link that misses every event is a link that times out).
    ///   - connectionInterval: How long one missed connection event holds a packet; by default
    ///     30 ms, a typical phone-to-sensor interval.
    ///   - seed: The seed of the generator that picks the losses.
    public func setLinkQuality(
        notificationLoss: Double = 0, missedConnectionEvents: Double = 0,
        connectionInterval: Duration = .milliseconds(30), seed: UInt64 = 0
    ) {
        precondition((0...1).contains(notificationLoss), "a notification loss of \(notificationLoss) is outside 0–1")
        precondition(
            (0..<1).contains(missedConnectionEvents),
            "a share of missed connection events of \(missedConnectionEvents) is outside 0..<1")
        precondition(connectionInterval >= .zero, "a connection interval of \(connectionInterval) is negative")
        radio.record(
            .fault,
            "\(address) link-quality notification-loss \(notificationLoss) missed-connection-events "
                + "\(missedConnectionEvents) interval \(connectionInterval) seed \(seed)")
        radio.state.withLock {
            $0.devices[address]?.linkQuality = SimulatedLinkQuality(
                notificationLoss: notificationLoss, missedConnectionEvents: missedConnectionEvents,
                connectionInterval: connectionInterval, seed: seed)
        }
    }

    /// Makes the peripheral slow: it answers every GATT request (read or write with response)
    /// `delay` after receiving it, in simulated time; `.zero` undoes it.
    ///
    /// A central's timeout shorter than the delay fires first, as it would against a busy sensor.
    /// A link that drops while a request waits ends the request with
    /// ``/Able/BluetoothError/Code/disconnected``.
    ///
    /// ```swift
    /// let sensor = radio.peripheral("C0:FF:EE:00:00:01")
    /// sensor.answerRequests(after: .milliseconds(300))
    /// ```
    ///
    /// - Parameter delay: How long each request waits for its answer.
    public func answerRequests(after delay: Duration) {
        precondition(delay >= .zero, "a response delay of \(delay) is negative")
        radio.record(.fault, "\(address) answer-requests-after \(delay)")
        radio.state.withLock { $0.devices[address]?.responseDelay = delay }
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
