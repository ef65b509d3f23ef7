import AbleCore
import AbleIO

/// Something registered with a simulated adapter's stack that must register again when the
/// stack comes back (a GATT server, an advertising set): what BlueZ forgets when `bluetoothd`
/// restarts.
struct StackListener: Sendable {
    /// The adapter it is registered on.
    var adapter: BluetoothAddress
    /// The stack went: the registration is gone.
    var down: @Sendable (BluetoothError) -> Void
    /// The stack and the adapter are back: register again.
    var up: @Sendable () -> Void
}

extension SimulatedRadio {
    // MARK: The stack going and coming back

    /// Stops the simulated Bluetooth stack, as `bluetoothd` stopping does on a real system: every
    /// adapter goes away, with its connections (their streams end, their reasons and errors say
    /// ``/Able/BluetoothError/Code/daemonUnavailable``), scans, advertising and standing pairing
    /// agent, and every server's registration; until ``startStack()`` every call on the radio's
    /// adapters fails with ``/Able/BluetoothError/Code/daemonUnavailable``.
    ///
    /// What the adapters store (bonds, known devices, trust) stays, as BlueZ keeps its storage
    /// directory. L2CAP listeners stay too: on Linux they are kernel sockets, which do not
    /// depend on `bluetoothd`. Able's objects behave as on BlueZ: a ``/Able/GATTServer`` and an
    /// ``/Able/AdvertisingSet`` stay open and register again when the stack is back.
    /// Stopping a stack that is down does nothing.
    public func stopStack() {
        let adapters = state.withLock { state -> [SimulatedAdapterState] in
            guard !state.isStackDown else { return [] }
            state.isStackDown = true
            let adapters = state.adapters.values.sorted { $0.name < $1.name }
            state.stoppedAdapters = adapters
            return adapters
        }
        guard !adapters.isEmpty else { return }
        for adapter in adapters {
            removeAdapter(
                named: adapter.name,
                error: BluetoothError(
                    .daemonUnavailable, message: "the Bluetooth stack stopped (adapter \(adapter.name))"))
        }
    }

    /// Starts the simulated Bluetooth stack again after ``stopStack()``: the adapters come back
    /// under their names and addresses, with their settings (alias, power, discoverability,
    /// capabilities, MTU) but without what registered with the stack; then every open GATT server
    /// and advertising set of the radio registers again by itself. Starting a stack that runs
    /// does nothing.
    public func startStack() {
        let adapters = state.withLock { state -> [SimulatedAdapterState] in
            guard state.isStackDown else { return [] }
            state.isStackDown = false
            defer { state.stoppedAdapters = [] }
            for var adapter in state.stoppedAdapters {
                adapter.advertisingSets = []
                adapter.pairingAgent = nil
                state.adapters[adapter.address] = adapter
                state.removedAdapters[adapter.name] = nil
            }
            return state.stoppedAdapters
        }
        for adapter in adapters {
            adapterAdded(adapter.address)
            registrationsReturn(to: adapter.address)
        }
    }

    /// Restarts the simulated Bluetooth stack, as `systemctl restart bluetooth` does:
    /// ``stopStack()``, a gap of `down` on the radio's ``clock``, then ``startStack()``.
    ///
    /// - Parameter down: How long the stack stays away, in simulated time; calls made meanwhile
    ///   fail with ``/Able/BluetoothError/Code/daemonUnavailable``.
    /// - Throws: `CancellationError` when the task is cancelled during the gap (the stack is then
    ///   started again before this returns).
    public func restartStack(down: Duration = .zero) async throws {
        stopStack()
        defer { startStack() }
        if down > .zero { try await clock.sleep(for: down) }
    }

    /// Whether the simulated stack is down (between ``stopStack()`` and ``startStack()``).
    public var isStackDown: Bool { state.withLock { $0.isStackDown } }

    /// Registers something that must register again when the stack comes back; returns its id
    /// for ``removeStackListener(_:)``.
    func addStackListener(_ listener: StackListener) -> UInt64 {
        state.withLock { state in
            let id = state.makeID()
            state.stackListeners[id] = listener
            return id
        }
    }

    /// An adapter went (with the stack, or removed): what was registered on it is gone.
    func registrationsWent(from adapter: BluetoothAddress, _ error: BluetoothError) {
        let listeners = state.withLock { $0.stackListeners.values.filter { $0.adapter == adapter } }
        for listener in listeners { listener.down(error) }
    }

    /// An adapter is back: what was registered on it registers again.
    func registrationsReturn(to adapter: BluetoothAddress) {
        let listeners = state.withLock { state in
            state.adapters[adapter] == nil ? [] : state.stackListeners.values.filter { $0.adapter == adapter }
        }
        for listener in listeners { listener.up() }
    }

    func removeStackListener(_ id: UInt64) {
        _ = state.withLock { $0.stackListeners.removeValue(forKey: id) }
    }
}
