/// The backend of the system's adapters: what ``Adapter/default()`` and ``Adapter/named(_:)``
/// open.
///
/// On Linux that is BlueZ, in the `AbleBlueZ` module, which depends on this one. The `Able`
/// product links it into every program that uses Able, so this module finds it by its type name
/// at run time instead of importing it: the dependency arrows keep pointing down, from the
/// backends to the public API, and users still write only `import Able`.
package protocol SystemBackend: SendableMetatype {
    /// Opens the adapter named `name`, or the system's default one for `nil`.
    static func adapter(named name: String?) async throws -> any AdapterBackend
}

extension Adapter {
    /// The mangled name of `AbleBlueZ.BlueZSystemBackend`; a test in AbleBlueZ checks it.
    package static let systemBackendTypeName = "9AbleBlueZ0B14ZSystemBackendO"

    /// The system backend linked into this program, if any.
    static let systemBackend: (any SystemBackend.Type)? =
        _typeByName(systemBackendTypeName) as? any SystemBackend.Type

    static func systemAdapter(named name: String?) async throws -> Adapter {
        guard let backend = systemBackend else {
            throw BluetoothError(
                .notSupported,
                message: "no system Bluetooth backend is linked into this program: depend on the Able product, "
                    + "which brings BlueZ's")
        }
        return Adapter(backend: try await backend.adapter(named: name))
    }
}
