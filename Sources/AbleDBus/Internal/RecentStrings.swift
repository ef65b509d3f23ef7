#if canImport(Glibc)
    import Glibc
#endif

/// The Swift strings of the C strings seen last, so that the strings a stream of similar
/// messages repeats (header fields such as sender, path, interface and member; in bodies, the
/// object path of the device a request comes from, the interface a `PropertiesChanged` names)
/// are not copied and validated again for every message. Confined to the connection's event loop.
///
/// A string of 15 UTF-8 bytes or fewer is stored inline by Swift, without an allocation, so
/// ``bodyString(_:)`` makes those at once and looks up only longer ones. A miss costs what making
/// the string costs anyway (one allocation) and a comparison with the entries of the same length.
struct RecentStrings {
    /// Native strings, each compared in place through its contiguous UTF-8.
    private var entries: [String] = []
    private var nextVictim = 0
    private let capacity: Int

    init(capacity: Int = 8) {
        precondition(capacity > 0, "a cache of recent strings holds at least one")
        self.capacity = capacity
        entries.reserveCapacity(capacity)
    }

    /// The string of `cString`, reused when one of the recent entries has the same bytes.
    mutating func string(_ cString: UnsafePointer<CChar>) -> String {
        string(cString, length: strlen(cString))
    }

    /// The string of `cString`, looked up only when it is too long to be stored inline: for the
    /// strings of message bodies, which are more often short and varied than header fields.
    mutating func bodyString(_ cString: UnsafePointer<CChar>) -> String {
        let length = strlen(cString)
        guard length > Self.longestInline else {
            return String(decoding: UnsafeRawBufferPointer(start: cString, count: length), as: UTF8.self)
        }
        return string(cString, length: length)
    }

    /// The longest string, in UTF-8 bytes, that Swift stores without an allocation on 64-bit
    /// platforms.
    private static let longestInline = 15

    private mutating func string(_ cString: UnsafePointer<CChar>, length: Int) -> String {
        let bytes = UnsafeRawBufferPointer(start: cString, count: length)
        // Through the buffer, the entries are compared without a retain and release of each.
        let found = entries.withUnsafeBufferPointer { entries in
            entries.firstIndex { entry in
                entry.utf8.count == length
                    && entry.utf8.withContiguousStorageIfAvailable { stored in
                        length == 0 || memcmp(stored.baseAddress!, cString, length) == 0
                    } == true
            }
        }
        if let found { return entries[found] }
        let string = String(decoding: bytes, as: UTF8.self)
        if entries.count < capacity {
            entries.append(string)
        } else {
            entries[nextVictim] = string
            nextVictim = (nextVictim + 1) % capacity
        }
        return string
    }
}
