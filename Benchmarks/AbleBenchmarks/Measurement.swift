#if canImport(Glibc)
    import Glibc
#endif

/// A point in time and the CPU time this process had used by then.
struct Mark {
    var wall: Double
    var user: Double
    var system: Double

    static func now() -> Mark {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Mark(wall: monotonicSeconds(), user: seconds(usage.ru_utime), system: seconds(usage.ru_stime))
    }

    private static func seconds(_ time: timeval) -> Double {
        Double(time.tv_sec) + Double(time.tv_usec) / 1e6
    }
}

func monotonicSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// What one run found, printed as the line `Scripts/bench` reads (the C programs print the same).
struct Measurement {
    var operations: Int
    /// The wall time the rate is computed from.
    var wall: Double
    var start: Mark
    var end: Mark
    var lost = 0
    var reordered = 0
    var dropped = 0
    /// For a receiver whose figure spans the values after the first: the CPU seconds from just
    /// before it subscribed to the first value, printed for information.
    var setup: Double?

    func report() {
        var fields = [
            "ops=\(operations)", "wall=\(wall)", "user=\(end.user - start.user)", "sys=\(end.system - start.system)",
            "lost=\(lost)", "reordered=\(reordered)", "dropped=\(dropped)",
        ]
        if let setup { fields.append("setup=\(setup)") }
        printAndFlush("result " + fields.joined(separator: " "))
    }
}

/// Prints a line and flushes it at once: the script waits for lines such as `READY` in a file.
func printAndFlush(_ line: String) {
    print(line)
    fflush(nil)  // all streams: `stdout` itself is not concurrency-safe to name
}

/// Where the Swift program runs its loops.
enum Placement: String {
    /// In tasks on the global concurrent executor: every call hops to the connection's queue and back.
    case global
    /// In an actor that shares the connection's executor, as `DBusExecutor` documents, so that no
    /// call hops to the connection's queue. (The runtime still resumes every continuation on the
    /// global executor before it hops back to the actor.)
    case shared
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
