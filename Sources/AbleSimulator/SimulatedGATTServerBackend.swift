import AbleCore
import AbleIO

/// A GATT server on a simulated adapter.
struct SimulatedGATTServerBackend: GATTServerBackend {
    let radio: SimulatedRadio
    let address: BluetoothAddress

    /// Serves `core`; centrals still connected from an earlier server on the adapter see their
    /// services change, as BlueZ's Service Changed indication makes them.
    func open(_ core: GATTServerCore, events: GATTServerEvents) async throws {
        radio.state.withLock { state in
            if state.devices[address] == nil {
                state.devices[address] = SimulatedDevice(
                    address: address, advertisement: nil, rssi: -40, mtu: state.serverMTU(of: address))
            }
        }
        radio.replaceDatabase(of: address, with: core, events: .some(events))
    }

    /// Stops serving. As on BlueZ (where unregistering the application leaves the links up),
    /// connected centrals stay connected and see the services go.
    func close() async {
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
