#if canImport(Glibc)
    import Glibc
#endif

/// Whether this test process was built with a sanitizer, and how much slower that makes it.
///
/// ThreadSanitizer and AddressSanitizer instrument every memory access: code runs several times
/// slower than a plain debug build. Tests that measure something in wall-clock time (a daemon
/// that must answer, a read that must come back to back with the last) stretch their limits by
/// ``slowdown``; tests that repeat a race thousands of times run fewer rounds.
public enum Sanitizers {
    /// Whether the ThreadSanitizer runtime is linked into this process.
    public static let isThreadSanitizerActive = isLinked("__tsan_init")
    /// Whether the AddressSanitizer runtime is linked into this process.
    public static let isAddressSanitizerActive = isLinked("__asan_init")

    /// How many times longer wall-clock limits are in this process: 10 under ThreadSanitizer
    /// (measured here: 5 to 15 times slower), 3 under AddressSanitizer, else 1.
    public static let slowdown = isThreadSanitizerActive ? 10 : isAddressSanitizerActive ? 3 : 1

    private static func isLinked(_ symbol: String) -> Bool {
        let process = dlopen(nil, RTLD_NOW)
        defer { if let process { dlclose(process) } }
        return dlsym(process, symbol) != nil
    }
}

extension Duration {
    /// This duration stretched by ``Sanitizers/slowdown``: a wall-clock limit that means the same
    /// under a sanitizer.
    public var allowingForSanitizers: Duration { self * Sanitizers.slowdown }

    /// The limit for something a test expects to happen (a connection, a scan's first result, a
    /// condition ``waitUntil(timeout:sourceLocation:_:)`` polls): a safety net for a hang, not a
    /// measure. 30 s, stretched by ``Sanitizers/slowdown``, within the suites' one-minute limits:
    /// a shared machine stalls for 10 s at times, and a loaded one (two cores busy, heavy tests in
    /// parallel on the same two pool threads) held a 300-SDU flow-control test's tasks for over
    /// 5 s, so a limit of a few seconds fails there with nothing wrong. A test of a timeout itself
    /// gives its own short one.
    public static var safetyNet: Duration { .seconds(30).allowingForSanitizers }
}
