import AbleIO

/// The write sockets a backend has acquired, one per characteristic, shared by every
/// ``Peripheral`` of the backend: a write finds its socket without a bus call, a socket that
/// ended is acquired again on the next write, and a characteristic whose backend refused for
/// good is not asked again until the link is released.
package final class AcquiredSocketTable<Key: Hashable & Sendable>: Sendable {
    /// What an attempt to acquire a socket came to.
    package enum Acquisition: Sendable {
        case acquired(AcquiredSocket)
        /// Refused; with `remember`, not asked again until ``forget(where:)``.
        case refused(remember: Bool)
    }

    private enum Entry {
        case socket(AcquiredSocket)
        case refused
    }

    private let entries = Lock<[Key: Entry]>([:])
    /// Puts acquisitions (bus calls) in line, so one characteristic never has two sockets.
    private let acquiring = FIFOLock()

    package init() {}

    /// The open socket of `key`, if there is one: the hot path, one lock and no wait.
    package func openSocket(for key: Key) -> AcquiredSocket? {
        guard case .socket(let socket) = entries.withLock({ $0[key] }), socket.acceptsWrites else { return nil }
        return socket
    }

    /// The open socket of `key`, acquired with `acquire` when there is none; `nil` when the
    /// backend refuses. An open socket and a remembered refusal are found with one lock and no
    /// wait: where the backend refused for good, every write over the bus asks this first.
    package func socket(
        for key: Key, isolation: isolated (any Actor)? = #isolation,
        acquire: () async throws -> Acquisition
    ) async throws -> AcquiredSocket? {
        switch entries.withLock({ $0[key] }) {
        case .socket(let socket) where socket.acceptsWrites: return socket
        case .refused: return nil
        case .socket, nil: break
        }
        return try await acquiring.withLock { () async throws -> AcquiredSocket? in
            switch entries.withLock({ $0[key] }) {
            case .socket(let socket) where socket.acceptsWrites: return socket
            case .refused: return nil
            case .socket, nil: break
            }
            switch try await acquire() {
            case .acquired(let socket):
                entries.withLock { $0[key] = .socket(socket) }
                return socket
            case .refused(let remember):
                entries.withLock { $0[key] = remember ? .refused : nil }
                return nil
            }
        }
    }

    /// Releases the socket of `key`, if there is one, once its peer has read what was sent.
    package func release(_ key: Key) async {
        let socket = entries.withLock { entries -> AcquiredSocket? in
            guard case .socket(let socket) = entries[key] else { return nil }
            entries[key] = nil
            return socket
        }
        await socket?.release()
    }

    /// Releases the sockets, and forgets the refusals, of the keys that match.
    package func forget(where matches: (Key) -> Bool) async {
        let sockets = entries.withLock { entries -> [AcquiredSocket] in
            let keys = entries.keys.filter(matches)
            return keys.compactMap { key in
                guard case .socket(let socket) = entries.removeValue(forKey: key) else { return nil }
                return socket
            }
        }
        for socket in sockets { await socket.release() }
    }
}
