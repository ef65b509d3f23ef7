extension Result where Failure == any Error {
    /// Captures the outcome of an async throwing body.
    ///
    /// It lives here, in the module below both Able and AbleDBus, so that both use this one.
    package init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
