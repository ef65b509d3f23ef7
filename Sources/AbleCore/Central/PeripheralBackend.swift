/// What a backend (BlueZ, the simulator) provides for a ``Peripheral``.
package protocol PeripheralBackend: Sendable {
    var address: BluetoothAddress { get }
    var isConnected: Bool { get }
    func connect(timeout: Duration) async throws
    func disconnect() async throws
    var isPaired: Bool { get }
    func pair(with agent: PairingAgent, timeout: Duration) async throws
    func connectionStates() -> AsyncStream<Peripheral.ConnectionState>
    func services() throws -> [RemoteService]
    /// The changes of the peripheral's database from now on, each once the database is settled
    /// (see ``Peripheral/serviceChanges()``).
    func serviceChanges() -> AsyncStream<ServiceChange>
    func read(_ characteristic: RemoteCharacteristic, offset: Int) async throws -> [UInt8]
    /// Writes over the bus; with an `offset` or a value longer than one PDU allows, as a long
    /// write (prepare and execute).
    func write(_ value: [UInt8], to characteristic: RemoteCharacteristic, type: WriteType, offset: Int) async throws
    /// The characteristic's write-without-response socket, acquired if there is none open;
    /// `nil` when the backend does not grant one, and writes go over the bus.
    func writeSocket(for characteristic: RemoteCharacteristic) async throws -> AcquiredSocket?
    /// Releases the characteristic's write socket, if one is held (BlueZ refuses every other
    /// write of a characteristic while its socket is acquired).
    func releaseWriteSocket(for characteristic: RemoteCharacteristic) async
    func read(_ descriptor: RemoteDescriptor) async throws -> [UInt8]
    func write(_ value: [UInt8], to descriptor: RemoteDescriptor) async throws
    func mtu(of characteristic: RemoteCharacteristic) -> Int?
    /// Subscribes `continuation` to the characteristic's notifications (sharing one subscription
    /// per characteristic) and returns once values can flow.
    func subscribe(
        to characteristic: RemoteCharacteristic, into continuation: NotificationStream.Continuation,
        delivery: NotificationDelivery
    ) async throws
    /// Opens an L2CAP LE credit-based channel to `psm` on the peripheral.
    func openL2CAPChannel(psm: PSM, _ options: L2CAPOptions, timeout: Duration) async throws -> L2CAPChannel
}

extension PeripheralBackend {
    /// How long a request that failed with ATT's Unlikely Error waits for the link to drop before
    /// the failure is taken for what the peripheral said; if the link drops within it, the request
    /// failed as ``BluetoothError/Code/disconnected``.
    ///
    /// A peripheral that disconnects us answers our pending requests first (an Able server does,
    /// so that BlueZ never answers through a freed channel), and its `bluetoothd` drops the link
    /// 2 s after `Device1.Disconnect` (`DISCONNECT_TIMER` in src/device.c, every version): the
    /// grace covers that and the time the news takes to reach us. Both backends use it: BlueZ's in
    /// real time, the simulator's on the radio's clock.
    package static var linkLossGrace: Duration { .seconds(4) }
}
