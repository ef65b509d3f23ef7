/// A run of a dispatch source's handler, asked for explicitly: set up after the closures that
/// call it, since the handler belongs to the object those closures help build.
///
/// libdispatch on Linux reports a socket's end of file once: a run of the read handler that saw
/// the socket readable but left it unread (because the buffer was full, or because a consumer
/// was receiving) may never be followed by another. So whoever resumes the source, or meets the
/// end while receiving for itself, also runs the handler once more this way.
///
/// Thread safety: ``action`` is set once before the source starts and cleared once no one can
/// resume the source or receive any more; in between it is only read. Hence `@unchecked Sendable`.
final class HandlerKick: @unchecked Sendable {
    /// Runs the handler, on its queue.
    var action: (@Sendable () -> Void)?

    /// Runs ``action``, if it is set.
    func callAsFunction() {
        action?()
    }
}
