import AbleCore
import AbleIO

#if canImport(Glibc)
    import Glibc
#endif

// The simulated radio's model of BlueZ's `AcquireWrite` and `AcquireNotify`: a
// `socketpair(AF_UNIX, SOCK_SEQPACKET)` per acquired characteristic, the central holding one
// end and the simulated peripheral serving the other, with BlueZ's rules: a write socket only
// for a characteristic that allows write without response, values up to the link's MTU less
// 3 bytes, the socket closed when the link ends.

/// The checks of the values in flight through the simulated sockets, one per socket: a value
/// between the two ends runs on dispatch sources and tasks the simulated clock does not see, so
/// the clock waits while one is in flight.
final class SocketTraffic: Sendable {
    private let checks = Lock<(nextID: UInt64, byID: [UInt64: @Sendable () -> Bool])>((0, [:]))

    var isBusy: Bool { checks.withLock { $0.byID.values }.contains { $0() } }

    /// Adds a check; returns what removes it.
    func watch(_ check: @escaping @Sendable () -> Bool) -> @Sendable () -> Void {
        let id = checks.withLock { checks in
            checks.nextID += 1
            checks.byID[checks.nextID] = check
            return checks.nextID
        }
        return { [checks] in _ = checks.withLock { $0.byID.removeValue(forKey: id) } }
    }
}

extension SimulatedRadio {
    /// Releases the write sockets of a link that ended; their peripheral ends then stop.
    func releaseWriteSockets(between central: BluetoothAddress, and peripheral: BluetoothAddress) {
        Task { [writeSockets] in
            await writeSockets.forget { $0.central == central && $0.peripheral == peripheral }
        }
    }
}

extension SimulatedPeripheralBackend {
    /// The connection's key for a characteristic.
    private func key(_ characteristic: RemoteCharacteristic) throws -> RadioState.SubscriptionKey {
        guard let id = AttributeID(remote: characteristic.id) else {
            throw BluetoothError(.doesNotExist, message: "no attribute \(characteristic.id)")
        }
        return RadioState.SubscriptionKey(central: central, peripheral: address, attribute: id)
    }

    /// The socketpair of one acquired characteristic: the central's end as a descriptor (for an
    /// `AcquiredSocket`, which owns it) and the simulated peripheral's end as a channel.
    private static func makeAcquiredPair() throws -> (central: CInt, peripheral: L2CAPChannel) {
        let (central, peripheral) = try L2CAPChannel.makeSocketPair(mtu: 2048)
        do {
            return (central, try L2CAPChannel.wrapping(socket: peripheral, sendMTU: 2048, receiveMTU: 2048))
        } catch {
            _ = close(central)
            _ = close(peripheral)
            throw error
        }
    }

    func writeSocket(for characteristic: RemoteCharacteristic) async throws -> AcquiredSocket? {
        let core = try core()
        guard characteristic.properties.contains(.writeWithoutResponse) else { return nil }
        let key = try key(characteristic)
        let mtu = self.mtu
        let isConnected: @Sendable () -> Bool = { [self] in self.isConnected }
        return try await radio.writeSockets.socket(for: key) { () async throws -> AcquiredSocketTable.Acquisition in
            let (mine, peripheralEnd) = try Self.makeAcquiredPair()
            // The peripheral's side: each message is one Write Command, applied in order; like
            // BlueZ, it reports nothing back, and applies nothing once the link is gone.
            let socket = try AcquiredSocket(socket: mine, attMTU: mtu)
            let applying = Lock(false)
            // Also between taking a value out of the stream and marking it applying: the values
            // the central sent and the peripheral has not applied yet.
            let applied = Lock(0)
            let unwatch = radio.socketTraffic.watch { [weak socket] in
                applying.withLock { $0 } || applied.withLock { $0 } < (socket?.sentCount ?? 0)
                    || peripheralEnd.unreadByteCount > 0 || peripheralEnd.bufferedPacketCount > 0
                    || (socket?.unreadByteCount ?? 0) > 0
            }
            Task { [central, clock = radio.clock] in
                do {
                    for try await value in peripheralEnd.packets {
                        guard isConnected() else { break }
                        // As over D-Bus: a Write Command the link is not secure enough for is dropped.
                        guard commandAllowed(to: characteristic) else {
                            applied.withLock { $0 += 1 }
                            continue
                        }
                        applying.withLock { $0 = true }
                        clock.noteActivity()
                        try? await core.write(
                            key.attribute, value: value, offset: 0, kind: .command,
                            central: Central(address: central), mtu: mtu)
                        applied.withLock { $0 += 1 }
                        applying.withLock { $0 = false }
                    }
                } catch {}
                applying.withLock { $0 = false }
                unwatch()
                await peripheralEnd.close()
            }
            return .acquired(socket)
        }
    }

    func releaseWriteSocket(for characteristic: RemoteCharacteristic) async {
        guard let key = try? key(characteristic) else { return }
        await radio.writeSockets.release(key)
    }

    /// Subscribes through a socketpair: the peripheral's notifications go into a relay buffer
    /// registered like any stream, a task sends them into the peripheral's end, and the central's
    /// end feeds `continuation`. A link that ends finishes the relay, which closes the socket,
    /// which ends the stream with ``BluetoothError/Code/disconnected``.
    func subscribeThroughSocket(
        to characteristic: RemoteCharacteristic, into continuation: NotificationStream.Continuation,
        register: (NotificationStream.Continuation) throws -> Void
    ) throws {
        let relay = NotificationStream.Continuation(limit: 16_384, policy: .dropNewest)
        let (mine, peripheralEnd) = try Self.makeAcquiredPair()
        let uuid = characteristic.uuid
        // Why the radio ended the subscription (the characteristic went away with a service
        // change), for the stream to end with once the socket closes.
        let reason = Lock<BluetoothError?>(nil)
        let socket = try AcquiredSocket(
            socket: mine, attMTU: mtu, onValue: { continuation.yieldBytes($0) },
            onEnd: {
                continuation.finish(
                    throwing: reason.withLock { $0 }
                        ?? BluetoothError(.disconnected, message: "the notification socket of \(uuid) closed"))
            })
        let unwatch = radio.socketTraffic.watch { [weak socket] in
            peripheralEnd.unreadByteCount > 0 || (socket?.channel.bufferedPacketCount ?? 0) > 0
        }
        Task { [clock = radio.clock] in
            do {
                while let value = try await relay.nextBytes() {
                    try await peripheralEnd.send(value)
                    clock.noteActivity()
                }
            } catch let error as BluetoothError where error.code == .attributeRemoved {
                reason.withLock { $0 = error }
            } catch {}
            unwatch()
            await peripheralEnd.close()
        }
        do {
            try register(relay)
        } catch {
            relay.finish()
            throw error
        }
        continuation.onTermination {
            relay.finish()
            // Keeps the central's end open while the stream lives.
            _ = socket
        }
    }
}
