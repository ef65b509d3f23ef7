extension Result where Failure == any Error {
    /// Captures the outcome of an async throwing body.
    package init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
