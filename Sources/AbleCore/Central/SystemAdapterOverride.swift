/// The adapters that stand for the system's within a task: set by a simulated radio's test scope
/// (`SimulatedRadio.withSystemAdapters(_:)` and the `.simulatedRadio` test trait), read by
/// `Adapter.default()`, `Adapter.named(_:)`, `Adapter.all()` and `Adapter.events()` (module `Able`).
///
/// A task-local value, so that it holds for the task that set it and the child tasks it starts,
/// and for no other: tests running in parallel each see their own radio, and code outside a scope
/// sees the system's adapters on BlueZ.
package enum SystemAdapterOverride {
    /// The directory that answers for the system's adapters in this task, or `nil` for BlueZ.
    @TaskLocal package static var directory: (any AdapterDirectory)?

    /// The directory's default adapter: the first by name, as the system's is the first BlueZ lists.
    ///
    /// - Throws: ``BluetoothError/Code/notAvailable`` when the directory has no adapter.
    package static func defaultAdapter(in directory: any AdapterDirectory) throws -> Adapter {
        guard let first = directory.adapters().first else {
            throw BluetoothError(.notAvailable, message: "the simulated radio has no adapter")
        }
        return Adapter(backend: first)
    }

    /// The directory's adapter of that name.
    ///
    /// - Throws: ``BluetoothError/Code/doesNotExist`` when there is none.
    package static func adapter(named name: String, in directory: any AdapterDirectory) throws -> Adapter {
        guard let backend = directory.adapters().first(where: { $0.name == name }) else {
            throw BluetoothError(.doesNotExist, message: "the simulated radio has no adapter \(name)")
        }
        return Adapter(backend: backend)
    }
}
