import Able
import AbleStreams

/// A GATT server on a simulated adapter.
struct SimulatedGATTServerBackend: GATTServerBackend {
    let radio: SimulatedRadio
    let address: BluetoothAddress

    func open(_ core: GATTServerCore, events: GATTServerEvents) async throws {
        radio.state.withLock { state in
            if state.devices[address] == nil {
                state.devices[address] = SimulatedDevice(address: address, advertisement: nil, rssi: -40, mtu: 23)
            }
            state.devices[address]?.core = core
            state.devices[address]?.events = events
        }
    }

    func close() async {
        for central in connectedCentrals {
            radio.disconnect(central: central.address, peripheral: address, reason: "server closed")
        }
        radio.state.withLock { state in
            state.devices[address]?.core = nil
            state.devices[address]?.events = nil
        }
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

    var connectedCentrals: [Central] {
        radio.state.withLock { state in
            state.connections.filter { $0.peripheral == address }.map { Central(address: $0.central) }
                .sorted { $0.address < $1.address }
        }
    }

    func disconnect(_ central: Central) async throws {
        radio.disconnect(central: central.address, peripheral: address, reason: "disconnected by the peripheral")
    }
}
