import AbleIO

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A Unix file descriptor carried in a D-Bus message, owned by this object until taken.
///
/// A descriptor received in a message is a duplicate that belongs to the receiver: call
/// ``take()`` to become its owner. A descriptor nobody takes is closed when the last reference
/// to this object goes away, so none leaks. When sending, libdbus duplicates the descriptor;
/// the object keeps its own.
public final class DBusFileDescriptor: Hashable, Sendable, CustomStringConvertible {
    private let state: Lock<Int32?>

    /// Wraps `descriptor`; this object closes it unless it is taken.
    public init(owning descriptor: Int32) {
        state = Lock(descriptor)
    }

    /// The descriptor, or `nil` once taken.
    public var rawValue: Int32? { state.withLock { $0 } }

    /// Takes ownership of the descriptor: the caller must close it.
    ///
    /// - Returns: The descriptor, or `nil` when it was already taken.
    public func take() -> Int32? {
        state.withLock { fd in
            defer { fd = nil }
            return fd
        }
    }

    deinit {
        if let fd = state.withLock({ $0 }) { close(fd) }
    }

    public static func == (lhs: DBusFileDescriptor, rhs: DBusFileDescriptor) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    public var description: String { rawValue.map { "fd \($0)" } ?? "fd (taken)" }
}
