import CDBus
import Dispatch

/// The dispatch source behind one libdbus watch, stored as the watch's data.
final class WatchSource {
    private let source: any DispatchSourceProtocol
    private var suspended = true

    private init(source: any DispatchSourceProtocol) {
        self.source = source
    }

    /// Creates the source for `watch`, resumed when libdbus enables the watch.
    static func add(_ watch: OpaquePointer, queue: DispatchQueue, handle: @escaping (UInt32) -> Void) {
        let flags = dbus_watch_get_flags(watch)
        let watched =
            flags & DBUS_WATCH_READABLE.rawValue != 0 ? DBUS_WATCH_READABLE.rawValue : DBUS_WATCH_WRITABLE.rawValue
        let fd = dbus_watch_get_unix_fd(watch)
        let source: any DispatchSourceProtocol =
            watched == DBUS_WATCH_READABLE.rawValue
            ? DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            : DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { handle(watched) }
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
        watchSource.update(enabled: true)
        watchSource.source.cancel()
        dbus_watch_set_data(watch, nil, nil)
    }

    static func toggle(_ watch: OpaquePointer) {
        guard let data = dbus_watch_get_data(watch) else { return }
        Unmanaged<WatchSource>.fromOpaque(data).takeUnretainedValue().update(
            enabled: dbus_watch_get_enabled(watch) != 0)
    }

    private func update(enabled: Bool) {
        if enabled && suspended {
            suspended = false
            source.resume()
        } else if !enabled && !suspended {
            suspended = true
            source.suspend()
        }
    }
}
