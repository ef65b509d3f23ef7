/// Changes of one bus name's owner; see ``DBusConnection/nameOwnerChanges(of:)``.
///
/// Its buffering and lifetime are those of ``DBusSignalStream``.
///
/// Cancelling the task that iterates ends the stream: `next()` returns `nil` once the values
/// already buffered are taken, and the work behind the stream stops.
public struct NameOwnerChangeStream: AsyncSequence, Sendable {
    public typealias Element = DBusConnection.NameOwnerChange
    let signals: DBusSignalStream

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: signals.makeAsyncIterator()) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: DBusSignalStream.AsyncIterator

        public mutating func next() async throws -> DBusConnection.NameOwnerChange? {
            while let signal = try await base.next() {
                guard signal.arguments.count == 3, case .string(let name) = signal.arguments[0],
                    case .string(let old) = signal.arguments[1], case .string(let new) = signal.arguments[2]
                else { continue }
                return DBusConnection.NameOwnerChange(
                    name: name, oldOwner: old.isEmpty ? nil : old, newOwner: new.isEmpty ? nil : new)
            }
            return nil
        }
    }
}
