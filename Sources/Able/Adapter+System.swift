import AbleBlueZ
@_exported public import AbleCore

// The system's adapters, on BlueZ. They live in this module, above both AbleCore and the BlueZ
// backend, so that the default backend is an ordinary import: AbleCore knows no backend, the
// simulator depends on AbleCore alone, and `import Able` gives a program the whole public API
// (AbleCore, re-exported) with these entry points. Within a simulated radio's test scope
// (`SimulatedRadio.withSystemAdapters(_:)`, the `.simulatedRadio` trait) a task-local directory
// answers instead of BlueZ, for that task and its children only.
extension Adapter {
    /// The system's default adapter: the first one BlueZ lists (usually `hci0`).
    ///
    /// ```swift
    /// let adapter = try await Adapter.default()
    /// ```
    ///
    /// The corresponding BlueZ method is `org.freedesktop.DBus.ObjectManager.GetManagedObjects`
    /// (read once, on the first call; Able then follows the tree's signals).
    /// Within a simulated radio's test scope (the `.simulatedRadio` trait of module
    /// `AbleSimulatorTesting`, or `SimulatedRadio.withSystemAdapters(_:)`), it is the radio's
    /// first adapter by name instead, for the task in the scope and its child tasks.
    ///
    /// - Returns: The adapter.
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/daemonUnavailable`` when BlueZ is not
    ///   running, ``BluetoothError/Code/notAvailable`` when it has no adapter.
    public static func `default`() async throws -> Adapter {
        if let directory = SystemAdapterOverride.directory {
            return try SystemAdapterOverride.defaultAdapter(in: directory)
        }
        return Adapter(backend: try await BlueZSystemBackend.adapter(named: nil))
    }

    /// The adapter with the given name, such as `hci1`.
    ///
    /// The corresponding BlueZ method is `org.freedesktop.DBus.ObjectManager.GetManagedObjects`
    /// (read once, on the first call; Able then follows the tree's signals).
    /// Within a simulated radio's test scope it is the radio's adapter of that name instead.
    ///
    /// - Parameter name: The adapter's name: the last element of its BlueZ object path.
    /// - Returns: The adapter.
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/invalidArguments`` for a name no
    ///   adapter can have (empty, or other than letters, digits and `_`), checked before asking
    ///   BlueZ; ``BluetoothError/Code/doesNotExist`` when there is no such adapter,
    ///   ``BluetoothError/Code/daemonUnavailable`` when BlueZ is not running.
    public static func named(_ name: String) async throws -> Adapter {
        try InputChecks.adapterName(name)
        if let directory = SystemAdapterOverride.directory {
            return try SystemAdapterOverride.adapter(named: name, in: directory)
        }
        return Adapter(backend: try await BlueZSystemBackend.adapter(named: name))
    }

    /// Every adapter the system has now (on Linux, every adapter BlueZ lists), sorted by name.
    ///
    /// The corresponding BlueZ method is `org.freedesktop.DBus.ObjectManager.GetManagedObjects`
    /// (read once; Able then follows `InterfacesAdded` and `InterfacesRemoved`).
    ///
    /// Within a simulated radio's test scope it is the radio's adapters instead.
    ///
    /// - Returns: The adapters, sorted by name; empty when the system has none.
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/daemonUnavailable`` when BlueZ is not
    ///   running. No adapter is not an error: the array is empty.
    public static func all() async throws -> [Adapter] {
        if let directory = SystemAdapterOverride.directory {
            return directory.adapters().map(Adapter.init(backend:))
        }
        return try await BlueZSystemBackend.directory().adapters().map(Adapter.init(backend:))
    }

    /// The system's adapters appearing and disappearing: `.added` for every adapter present now,
    /// then each change as BlueZ announces it.
    ///
    /// When `bluetoothd` stops, every adapter is reported removed; when it starts again, its
    /// adapters are reported added.
    ///
    /// Within a simulated radio's test scope it follows the radio's adapters instead.
    ///
    /// Buffering: every event is kept until consumed (they are rare). Cancelling the task that
    /// iterates ends the stream and stops the watching behind it.
    ///
    /// The corresponding BlueZ signals are `org.freedesktop.DBus.ObjectManager.InterfacesAdded`
    /// and `InterfacesRemoved`.
    /// - Returns: The stream of ``AdapterEvent`` values.
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/daemonUnavailable`` when BlueZ is not
    ///   running when the stream is asked for.
    public static func events() async throws -> AsyncStream<AdapterEvent> {
        if let directory = SystemAdapterOverride.directory { return directory.adapterEvents() }
        return try await BlueZSystemBackend.directory().adapterEvents()
    }
}
