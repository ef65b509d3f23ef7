package import Able
package import AbleDBus

/// BlueZ as the system backend: ``Adapter/default()`` and ``Adapter/named(_:)`` find this type
/// by name (`Adapter.systemBackendTypeName`) and open their adapters through it.
package enum BlueZSystemBackend: SystemAdapterDirectory {
    package static func adapter(named name: String?) async throws -> any AdapterBackend {
        try await BlueZAdapterBackend.open(name: name, system: BlueZSystem.shared())
    }

    package static func directory() async throws -> any AdapterDirectory {
        BlueZAdapterDirectory(system: try await BlueZSystem.shared())
    }
}

extension Adapter {
    /// The adapter `name` of a BlueZ reached through `connection` rather than the system bus:
    /// for benchmarks and tests that run a BlueZ stand-in on a private bus.
    package static func bluez(named name: String, on connection: DBusConnection) async throws -> Adapter {
        Adapter(backend: try await BlueZAdapterBackend.open(name: name, system: BlueZSystem.open(on: connection)))
    }

    /// The adapters of a BlueZ reached through `connection`, and their coming and going, as
    /// ``all()`` and ``events()`` give them for the system's.
    package static func bluezDirectory(on connection: DBusConnection) async throws -> any AdapterDirectory {
        BlueZAdapterDirectory(system: try await BlueZSystem.open(on: connection))
    }
}
