extension Result where Failure == any Error {
    /// Captures the outcome of an async throwing body.
    ///
    /// It lives here, in the module below all of Able's others, so that they share this one. It is
    /// emitted into each caller, where it is specialized and inlined: a `package` generic is
    /// otherwise compiled only here, and ran unspecialized, looking up metadata, on every request
    /// of a GATT server (`@inlinable` serializes no body of a `package` declaration; this does).
    @_alwaysEmitIntoClient
    package init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
