package import AbleCore
package import AbleDBus

/// BlueZ as the system backend: the `Able` module's `Adapter.default()`, `Adapter.named(_:)`,
/// `Adapter.all()` and `Adapter.events()` open their adapters through it, on the system bus.
package enum BlueZSystemBackend {
    /// Opens the adapter named `name`, or the system's default one for `nil`.
    package static func adapter(named name: String?) async throws -> any AdapterBackend {
        try await BlueZAdapterBackend.open(name: name, system: BlueZSystem.shared())
    }

    /// The system's adapter directory, connecting to the system bus the first time.
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
    /// `Adapter.all()` and `Adapter.events()` give them for the system's.
    package static func bluezDirectory(on connection: DBusConnection) async throws -> any AdapterDirectory {
        BlueZAdapterDirectory(system: try await BlueZSystem.open(on: connection))
    }
}
