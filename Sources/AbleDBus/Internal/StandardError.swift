#if canImport(Glibc)
    import Glibc
#endif

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        var text = string
        text.withUTF8 { buffer in _ = Glibc.write(2, buffer.baseAddress, buffer.count) }
    }
}
