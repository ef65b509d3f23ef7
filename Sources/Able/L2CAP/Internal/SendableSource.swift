import Dispatch

/// A dispatch source, to capture in `@Sendable` closures.
///
/// Dispatch sources are thread-safe (`suspend`, `resume` and `cancel` may be called from any
/// thread), but the Linux Dispatch module does not mark them `Sendable`.
struct SendableSource: @unchecked Sendable {
    let source: any DispatchSourceProtocol

    init(_ source: any DispatchSourceProtocol) {
        self.source = source
    }
}
