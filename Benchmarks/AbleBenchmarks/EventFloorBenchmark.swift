import AbleDBus
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// What one readiness event of a socket costs before any D-Bus work: a ping-pong of 8 bytes over
/// an AF_UNIX socketpair with a peer thread that echoes them (blocking read and write), driven
/// by a `DispatchSource` read source on a serial queue (as AbleDBus drove libdbus's watch before
/// it had an event loop; as L2CAP channels are driven), by AbleDBus's event loop (`DBusExecutor`,
/// on a loop of its own), or by `poll(2)` in a loop (as libdbus's blocking calls in the C
/// reference do).
/// The CPU reported is the process's minus the peer thread's, per round trip.
func runEventFloor(count: Int, mode: String) throws -> Measurement {
    var descriptors: [Int32] = [-1, -1]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &descriptors) == 0 else {
        throw BenchmarkFailure("socketpair failed: errno \(errno)")
    }
    let (mine, peer) = (descriptors[0], descriptors[1])
    // [descriptor, user seconds, system seconds]: the peer thread's argument and its answer.
    let peerCPU = UnsafeMutablePointer<Double>.allocate(capacity: 3)
    defer { peerCPU.deallocate() }
    peerCPU[0] = Double(peer)
    var thread = pthread_t()
    pthread_create(
        &thread, nil,
        { argument in
            let slots = argument!.assumingMemoryBound(to: Double.self)
            let fd = Int32(slots[0])
            var bytes: UInt64 = 0
            while read(fd, &bytes, 8) == 8 {
                _ = write(fd, &bytes, 8)
            }
            var usage = rusage()
            getrusage(__rusage_who_t(1), &usage)  // RUSAGE_THREAD
            slots[1] = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            slots[2] = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
            return nil
        }, peerCPU)

    let start = Mark.now()
    switch mode {
    case "poll":
        var bytes: UInt64 = 0
        for round in 0..<count {
            bytes = UInt64(round)
            _ = write(mine, &bytes, 8)
            var descriptor = pollfd(fd: mine, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, -1)
            _ = read(mine, &bytes, 8)
        }
    case "dispatch":
        let done = DispatchSemaphore(value: 0)
        let source = DispatchSource.makeReadSource(fileDescriptor: mine, queue: DispatchQueue(label: "event-floor"))
        // Only the source's handler touches `rounds`, on its serial queue.
        nonisolated(unsafe) var rounds = 0
        source.setEventHandler {
            var bytes: UInt64 = 0
            _ = read(mine, &bytes, 8)
            rounds += 1
            if rounds == count {
                done.signal()
            } else {
                _ = write(mine, &bytes, 8)
            }
        }
        source.resume()
        var first: UInt64 = 0
        _ = write(mine, &first, 8)
        done.wait()
        source.cancel()
    case "loop":
        let done = DispatchSemaphore(value: 0)
        // Only the handler touches `rounds`, on the loop's thread.
        nonisolated(unsafe) var rounds = 0
        let stop = DBusExecutor().watchReadable(mine) {
            var bytes: UInt64 = 0
            // The watch ends asynchronously: it may still see the socket shut down after the last round.
            guard rounds < count, read(mine, &bytes, 8) == 8 else { return }
            rounds += 1
            if rounds == count {
                done.signal()
            } else {
                _ = write(mine, &bytes, 8)
            }
        }
        var first: UInt64 = 0
        _ = write(mine, &first, 8)
        done.wait()
        stop()
    default:
        throw BenchmarkFailure("event-floor mode is dispatch, loop or poll, not \(mode)")
    }
    var end = Mark.now()
    shutdown(mine, Int32(SHUT_RDWR))
    pthread_join(thread, nil)
    close(mine)
    close(peer)
    // The peer thread's CPU is not the measured side's: take it out (it ran only during the loop).
    end.user -= peerCPU[1]
    end.system -= peerCPU[2]
    return Measurement(operations: count, wall: end.wall - start.wall, start: start, end: end)
}
