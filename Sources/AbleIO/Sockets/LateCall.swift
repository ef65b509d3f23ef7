/// A call set up after the closures that make it: for a closure given to an object's own parts
/// (its stream's buffer, its receiver) that must call back into the object, which does not exist
/// yet when the parts are built.
///
/// Thread safety: ``action`` is set once, right after the object is built, before anything can
/// call it, and cleared at most once when nothing can call it any more; in between it is only
/// read. Hence `@unchecked Sendable`.
package final class LateCall: @unchecked Sendable {
    /// What to run.
    package var action: (@Sendable () -> Void)?

    /// Runs ``action``, if it is set.
    package func callAsFunction() {
        action?()
    }
}
