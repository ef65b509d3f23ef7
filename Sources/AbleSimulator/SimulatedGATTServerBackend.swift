import AbleCore
import AbleIO

/// A GATT server on a simulated adapter. It stays registered through a stack restart
/// (``SimulatedRadio/stopStack()``): it stops serving when the stack goes and serves again when it
/// is back, reporting both, as the BlueZ application does.
struct SimulatedGATTServerBackend: GATTServerBackend {
    let radio: SimulatedRadio
    let address: BluetoothAddress
    /// The server's ``StackListener``, while it is open.
    private let stackListener = Lock<UInt64?>(nil)

    init(radio: SimulatedRadio, address: BluetoothAddress) {
        self.radio = radio
        self.address = address
    }

    /// Serves `core`; centrals still connected from an earlier server on the adapter see their
    /// services change, as BlueZ's Service Changed indication makes them.
    ///
    /// - Throws: ``/Able/BluetoothError/Code/daemonUnavailable`` while the stack is down,
    ///   ``/Able/BluetoothError/Code/adapterRemoved`` when the adapter was removed.
    func open(_ core: GATTServerCore, events: GATTServerEvents) async throws {
        try radio.state.withLock { state in
            guard state.adapters[address] != nil else {
                throw state.absence(of: address, "the adapter was removed")
            }
            if state.devices[address] == nil {
                state.devices[address] = SimulatedDevice(
                    address: address, advertisement: nil, rssi: -40, mtu: state.serverMTU(of: address))
            }
        }
        radio.replaceDatabase(of: address, with: core, events: .some(events))
        let id = radio.addStackListener(
            StackListener(
                adapter: address,
                down: { [radio, address] error in
                    // The links went with the adapters, and were reported; nothing serves now.
                    radio.replaceDatabase(of: address, with: nil, events: .some(nil))
                    events.servingChanged(ServingChange(isServing: false, reason: error))
                },
                up: { [radio, address] in
                    radio.state.withLock { state in
                        if state.devices[address] == nil {
                            state.devices[address] = SimulatedDevice(
                                address: address, advertisement: nil, rssi: -40, mtu: state.serverMTU(of: address))
                        }
                    }
                    radio.replaceDatabase(of: address, with: core, events: .some(events))
                    events.servingChanged(ServingChange(isServing: true))
                }))
        stackListener.withLock { $0 = id }
    }

    /// Stops serving. As on BlueZ (where unregistering the application leaves the links up),
    /// connected centrals stay connected and see the services go.
    func close() async {
        if let id = stackListener.withLock({ $0 }) { radio.removeStackListener(id) }
        radio.replaceDatabase(of: address, with: nil, events: .some(nil))
    }

    func send(
        _ value: [UInt8], of characteristic: AttributeID, to central: Central?, indicate: Bool, timeout: Duration
    ) async throws {
        // A simulated central confirms an indication as it receives it.
        radio.deliver(value, from: address, attribute: characteristic, to: central?.address)
    }

    var clockReading: Duration { radio.clock.now.offset }

    func sleep(for duration: Duration) async throws {
        try await radio.clock.sleep(for: duration)
    }

    /// The MTU of the central's link to this adapter, as its ``SimulatedPeripheralBackend`` sees it.
    func attMTU(of central: Central) -> Int? {
        radio.state.withLock { state in
            guard state.connections.contains(RadioState.Connection(central: central.address, peripheral: address))
            else { return nil }
            return state.linkMTU(central: central.address, peripheral: address)
        }
    }

    var connectedCentrals: [Central] {
        radio.state.withLock { state in
            state.connections.filter { $0.peripheral == address }.map { Central(address: $0.central) }
                .sorted { $0.address < $1.address }
        }
    }

    func disconnect(_ central: Central) async throws {
        radio.disconnect(
            central: central.address, peripheral: address, reason: .linkEnded(.peerDisconnected),
            serverReason: "this adapter ended the link")
    }
}
