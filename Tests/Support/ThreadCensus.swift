#if canImport(Glibc)
    import Glibc
#endif

/// The threads of this process, by name.
public enum ThreadCensus {
    /// The threads of this process named `name`, from `/proc/self/task/*/comm`.
    public static func threads(named name: String) -> Int {
        guard let directory = opendir("/proc/self/task") else { return -1 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let task = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            // open/read/close, not stdio: ThreadSanitizer's fclose interceptor crashed here (SEGV in
            // its FILE metadata map) once a run.
            guard task.first?.isNumber == true else { continue }
            let file = open("/proc/self/task/\(task)/comm", O_RDONLY | O_CLOEXEC)
            guard file >= 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 64)
            let length = buffer.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
            close(file)
            if length > 0, String(decoding: buffer.prefix(length), as: UTF8.self) == name + "\n" { count += 1 }
        }
        return count
    }
}
