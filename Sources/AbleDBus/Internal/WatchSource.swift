import CDBus
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// The dispatch source behind one libdbus watch, stored as the watch's data.
final class WatchSource {
    private let source: any DispatchSourceProtocol
    private var suspended = true
    /// Whether libdbus enabled the watch.
    private var enabled = false
    /// Whether the connection paused the source (``setPaused(_:_:)``).
    private var paused = false

    private init(source: any DispatchSourceProtocol) {
        self.source = source
    }

    /// Creates the source for `watch`, resumed when libdbus enables the watch.
    static func add(_ watch: OpaquePointer, queue: DispatchQueue, handle: @escaping (UInt32) -> Void) {
        let flags = dbus_watch_get_flags(watch)
        let watched =
            flags & DBUS_WATCH_READABLE.rawValue != 0 ? DBUS_WATCH_READABLE.rawValue : DBUS_WATCH_WRITABLE.rawValue
        // The source watches a duplicate of libdbus's descriptor and closes it only once the source
        // is cancelled. libdbus closes its own descriptor right after removing the watch, while
        // libdispatch unregisters a cancelled source later, on its manager thread; had the source
        // watched that descriptor, a new socket reusing its number in between (another connection)
        // would meet the old registration, and libdispatch crashes on that
        // (`_dispatch_source_refs_finalize_unregistration`). The duplicate shares the socket, so
        // it is readable and writable exactly when libdbus's descriptor is.
        // (Out of descriptors, it watches libdbus's own and takes its chances.)
        let original = dbus_watch_get_unix_fd(watch)
        let duplicate = fcntl(original, F_DUPFD_CLOEXEC, 0)
        let fd = duplicate >= 0 ? duplicate : original
        let source: any DispatchSourceProtocol =
            watched == DBUS_WATCH_READABLE.rawValue
            ? DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            : DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { handle(watched) }
        if duplicate >= 0 { source.setCancelHandler { close(duplicate) } }
        let watchSource = WatchSource(source: source)
        dbus_watch_set_data(watch, Unmanaged.passRetained(watchSource).toOpaque()) { data in
            Unmanaged<WatchSource>.fromOpaque(data!).release()
        }
        watchSource.update(enabled: dbus_watch_get_enabled(watch) != 0)
    }

    static func remove(_ watch: OpaquePointer) {
        guard let data = dbus_watch_get_data(watch) else { return }
        let watchSource = Unmanaged<WatchSource>.fromOpaque(data).takeUnretainedValue()
        // A suspended source must be resumed before it is cancelled and released.
        watchSource.paused = false
        watchSource.update(enabled: true)
        watchSource.source.cancel()
        dbus_watch_set_data(watch, nil, nil)
    }

    static func toggle(_ watch: OpaquePointer) {
        guard let data = dbus_watch_get_data(watch) else { return }
        Unmanaged<WatchSource>.fromOpaque(data).takeUnretainedValue().update(
            enabled: dbus_watch_get_enabled(watch) != 0)
    }

    /// Stops (or restarts) the source's events while the watch stays enabled: the connection
    /// then reads the socket on its own schedule.
    static func setPaused(_ watch: OpaquePointer, _ paused: Bool) {
        guard let data = dbus_watch_get_data(watch) else { return }
        let watchSource = Unmanaged<WatchSource>.fromOpaque(data).takeUnretainedValue()
        watchSource.paused = paused
        watchSource.update(enabled: watchSource.enabled)
    }

    private func update(enabled: Bool) {
        self.enabled = enabled
        let running = enabled && !paused
        if running && suspended {
            suspended = false
            source.resume()
        } else if !running && !suspended {
            suspended = true
            source.suspend()
        }
    }
}
