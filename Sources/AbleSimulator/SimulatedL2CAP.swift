import AbleCore
import AbleIO
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An L2CAP channel between two simulated devices: the two ends of an AF_UNIX `SOCK_SEQPACKET`
/// socketpair, each owned by an ``L2CAPChannel``.
///
/// The radio does not own the channels; it knows their sockets by descriptor and inode, so it
/// can tell whether an end is still open (a closed descriptor may be reused by another socket,
/// with another inode) and shut both ends down when the link drops.
struct SimulatedL2CAPLink {
    var central: BluetoothAddress
    var peripheral: BluetoothAddress
    var psm: PSM
    var ends: [DescriptorIdentity]
    var loss: LinkLoss

    /// Whether either channel is still open.
    var isOpen: Bool { ends.contains { $0.isOpen } }

    /// Drops the link under both channels, as a lost connection does: each sees its peer gone.
    func shutDown() {
        // A channel one side already closed has ended as a peer's close ends it; the link
        // going down afterwards changes nothing for the other side.
        if ends.allSatisfy(\.isOpen) { loss.markLost() }
        for end in ends where end.isOpen { _ = Glibc.shutdown(end.descriptor, CInt(SHUT_RDWR)) }
    }
}

/// Whether the radio dropped a link under its channels.
final class LinkLoss: Sendable {
    private let lost = Atomic(false)
    var isLost: Bool { lost.load(ordering: .acquiring) }
    func markLost() { lost.store(true, ordering: .releasing) }
}

/// The socket calls of a simulated channel: the system's, except that the end of the socket
/// after the radio dropped the link reads as a reset (`ECONNRESET`), as a lost Bluetooth link
/// does, while a peer closing its end stays an ordinary end, as the kernel reports a peer's
/// L2CAP Disconnection Request (channels never send empty SDUs, so a zero-length read is
/// always the end).
func simulatedChannelOperations(_ loss: LinkLoss) -> SocketOperations {
    var operations = SocketOperations.system
    operations.receive = { socket, buffer, flags in
        let result = SocketOperations.system.receive(socket, buffer, flags)
        if case .success(0) = result, loss.isLost { return .failure(.connectionReset) }
        return result
    }
    return operations
}

/// The MTU a simulated channel end receives when none is asked for: the kernel's default
/// (`L2CAP_DEFAULT_MTU`).
let defaultL2CAPMTU = 672

extension SimulatedAdapterBackend {
    func listenL2CAP(psm: PSM, _ options: L2CAPOptions) async throws -> L2CAPListener {
        if let receiveMTU = options.receiveMTU, !(23...65_535).contains(receiveMTU) {
            throw BluetoothError(.invalidArguments, message: "a receive MTU of \(receiveMTU) is outside 23–65,535")
        }
        guard psm == .automatic || psm.isFixed || psm.isDynamic else {
            throw BluetoothError(
                .invalidArguments, message: "\(psm) is not an LE PSM: use 0x0001–0x00FF, or automatic")
        }
        return try radio.state.withLock { state in
            guard state.adapters[address]?.isPowered == true else {
                throw BluetoothError(.notReady, message: "\(name) is powered off")
            }
            state.listeners = state.listeners.filter { $0.value.offer.isListening }
            let chosen: PSM
            if psm == .automatic {
                guard
                    let free = PSM.dynamicRange.lazy.map(PSM.init(rawValue:)).first(where: {
                        state.listeners[RadioState.ListenerKey(adapter: address, psm: $0)] == nil
                    })
                else {
                    throw BluetoothError(.alreadyExists, message: "every dynamic PSM of \(name) is taken")
                }
                chosen = free
            } else {
                guard state.listeners[RadioState.ListenerKey(adapter: address, psm: psm)] == nil else {
                    throw BluetoothError(.alreadyExists, message: "\(psm) is taken on \(name)")
                }
                chosen = psm
            }
            let (listener, offer) = try L2CAPListener.offeringChannels(on: chosen)
            state.listeners[RadioState.ListenerKey(adapter: address, psm: chosen)] = RadioState.Listener(
                offer: offer, options: options)
            return listener
        }
    }
}

extension SimulatedPeripheralBackend {
    func openL2CAPChannel(psm: PSM, _ options: L2CAPOptions, timeout: Duration) async throws -> L2CAPChannel {
        if let receiveMTU = options.receiveMTU, !(23...65_535).contains(receiveMTU) {
            throw BluetoothError(.invalidArguments, message: "a receive MTU of \(receiveMTU) is outside 23–65,535")
        }
        let listener = try radio.state.withLock { state in
            guard state.adapters[central]?.isPowered == true else {
                throw BluetoothError(.notReady, message: "the adapter is powered off")
            }
            let key = RadioState.ListenerKey(adapter: address, psm: psm)
            guard let listener = state.listeners[key], listener.offer.isListening else {
                state.listeners[key] = nil
                throw BluetoothError(
                    .connectionAttemptFailed,
                    message: "\(address) on \(psm) refused the L2CAP connection: nothing listens there")
            }
            return listener
        }
        let centralMTU = options.receiveMTU ?? defaultL2CAPMTU
        let peripheralMTU = listener.options.receiveMTU ?? defaultL2CAPMTU
        let (centralSocket, peripheralSocket) = try L2CAPChannel.makeSocketPair(mtu: max(centralMTU, peripheralMTU))
        let ends = [centralSocket, peripheralSocket].compactMap(DescriptorIdentity.init)
        let loss = LinkLoss()
        let centralChannel: L2CAPChannel
        do {
            centralChannel = try L2CAPChannel.wrapping(
                socket: centralSocket, sendMTU: peripheralMTU, receiveMTU: centralMTU, watermarks: options.watermarks,
                operations: simulatedChannelOperations(loss), peerAddress: address, peerAddressType: .public)
        } catch {
            _ = Glibc.close(centralSocket)
            _ = Glibc.close(peripheralSocket)
            throw error
        }
        let peripheralChannel: L2CAPChannel
        do {
            peripheralChannel = try L2CAPChannel.wrapping(
                socket: peripheralSocket, sendMTU: centralMTU, receiveMTU: peripheralMTU,
                watermarks: listener.options.watermarks, operations: simulatedChannelOperations(loss),
                peerAddress: central, peerAddressType: .public)
        } catch {
            _ = Glibc.close(peripheralSocket)
            throw error
        }
        guard listener.offer.offer(peripheralChannel) else {
            // The listener closed meanwhile, or its backlog is full: the kernel refuses.
            throw BluetoothError(
                .connectionAttemptFailed,
                message: "\(address) on \(psm) refused the L2CAP connection: the listener is closed or full")
        }
        radio.state.withLock { state in
            state.channels[state.makeID()] = SimulatedL2CAPLink(
                central: central, peripheral: address, psm: psm, ends: ends, loss: loss)
        }
        return centralChannel
    }
}

extension SimulatedRadio {
    /// Drops the L2CAP channels between two devices, as a lost link does.
    func dropL2CAPChannels(between central: BluetoothAddress, and peripheral: BluetoothAddress) {
        // The channels stay listed until their owners close them.
        let links = state.withLock { state in
            state.channels.values.filter {
                ($0.central == central && $0.peripheral == peripheral)
                    || ($0.central == peripheral && $0.peripheral == central)
            }
        }
        for link in links { link.shutDown() }
    }

    /// The L2CAP listeners and channels still open, for ``SimulatedRadio/openResources``.
    func openL2CAPResources() -> [String] {
        state.withLock { state in
            state.listeners = state.listeners.filter { $0.value.offer.isListening }
            state.channels = state.channels.filter { $0.value.isOpen }
            let listeners = state.listeners.keys.sorted { ($0.adapter, $0.psm) < ($1.adapter, $1.psm) }.map {
                "L2CAP listener on \($0.adapter) \($0.psm)"
            }
            let channels = state.channels.sorted { $0.key < $1.key }.map {
                "L2CAP channel \($0.value.central) → \($0.value.peripheral) \($0.value.psm)"
            }
            return listeners + channels
        }
    }
}
