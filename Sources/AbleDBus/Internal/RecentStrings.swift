#if canImport(Glibc)
    import Glibc
#endif

/// The Swift strings of the C strings seen last, so that the header fields of a stream of
/// similar messages (sender, path, interface, member) are not copied and validated again for
/// every message. Confined to the connection's event loop.
struct RecentStrings {
    private struct Entry {
        /// The C string's bytes, without its terminator.
        var bytes: [UInt8]
        var string: String
    }

    private var entries: [Entry] = []
    private var nextVictim = 0
    private let capacity: Int

    init(capacity: Int = 8) {
        self.capacity = capacity
        entries.reserveCapacity(capacity)
    }

    /// The string of `cString`, reused when one of the recent entries has the same bytes.
    mutating func string(_ cString: UnsafePointer<CChar>) -> String {
        let length = strlen(cString)
        let found = entries.withUnsafeBufferPointer { entries in
            entries.firstIndex { entry in
                entry.bytes.count == length
                    && entry.bytes.withUnsafeBytes { memcmp($0.baseAddress!, cString, length) == 0 }
            }
        }
        if let found { return entries[found].string }
        let bytes = UnsafeRawBufferPointer(start: cString, count: length)
        let entry = Entry(bytes: Array(bytes), string: String(decoding: bytes, as: UTF8.self))
        if entries.count < capacity {
            entries.append(entry)
        } else {
            entries[nextVictim] = entry
            nextVictim = (nextVictim + 1) % capacity
        }
        return entry.string
    }
}
