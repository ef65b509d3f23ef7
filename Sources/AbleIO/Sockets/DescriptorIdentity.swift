#if canImport(Glibc)
    import Glibc
#endif

/// A file descriptor known by its number and its inode, so that it can tell whether it is still
/// open: once closed, its number may be reused by another file, which has another inode.
package struct DescriptorIdentity: Sendable, Hashable {
    /// The descriptor's number.
    package let descriptor: CInt
    private let inode: ino_t

    /// The identity of `descriptor` now, or `nil` when it is not open.
    package init?(_ descriptor: CInt) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        self.descriptor = descriptor
        self.inode = status.st_ino
    }

    /// Whether the descriptor is still open on the same file.
    package var isOpen: Bool {
        var status = stat()
        return fstat(descriptor, &status) == 0 && status.st_ino == inode
    }
}
