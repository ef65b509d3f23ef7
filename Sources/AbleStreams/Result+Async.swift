extension Result where Failure == any Error {
    /// Captures the outcome of an async throwing body.
    ///
    /// It lives here, in the module below all of Able's others, so that they share this one. In
    /// their modules it runs unspecialized, looking up metadata on each call: code that runs per
    /// request or per value catches with `do`/`catch` instead.
    package init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
