#if canImport(Glibc)
    import Glibc
#endif

/// Reading `/proc` without Foundation.
enum ProcFS {
    /// The whole file as text, or `nil` when it cannot be opened.
    static func read(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += chunk[..<count]
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What each of the process's open descriptors refers to (`readlink` of `/proc/self/fd/N`),
    /// without the one reading the directory takes; empty when `/proc` is missing.
    static func descriptorTargets() -> [String] {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        let own = dirfd(directory)
        var targets: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let number = Int32(name), number != own else { continue }
            var buffer = [CChar](repeating: 0, count: 256)
            let length = readlink("/proc/self/fd/\(name)", &buffer, buffer.count - 1)
            targets.append(
                length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?")
        }
        closedir(directory)
        return targets.sorted()
    }
}
