import AbleCore
import AbleIO

extension SimulatedRadio {
    /// Hands a notified value to every stream subscribed to the attribute.
    ///
    /// Injected faults apply here: a dropped or lost notification reaches nobody, a delayed one
    /// (or one held by missed connection events) arrives later in simulated time, never before
    /// one sent earlier.
    /// `central` names the one central to deliver to; `nil` delivers to all.
    func deliver(
        _ value: [UInt8], from peripheral: BluetoothAddress, attribute: AttributeID, to central: BluetoothAddress? = nil
    ) {
        let now = clock.now.offset
        let traced = "\(peripheral) \(attribute.traced) \(value.count) bytes" + (central.map { " → \($0)" } ?? "")
        let delivery = state.withLock { state -> (streams: [NotificationStream.Continuation], at: Duration)? in
            guard var device = state.devices[peripheral] else { return ([], now) }
            defer { state.devices[peripheral] = device }
            if device.notificationsToDrop > 0 {
                device.notificationsToDrop -= 1
                return nil
            }
            if device.linkQuality.losesNotification() { return nil }
            // Sorted by subscription, so that streams hear a value in the order they subscribed.
            let streams = state.subscriptions.filter {
                $0.key.peripheral == peripheral && $0.key.attribute == attribute
                    && (central == nil || $0.key.central == central)
            }
            .flatMap { $0.value }.sorted { $0.key < $1.key }.map(\.value)
            let arrival = max(
                now + device.notificationDelay + device.linkQuality.missedEventsDelay(), device.lastNotificationArrival)
            device.lastNotificationArrival = arrival
            return (streams, arrival)
        }
        guard let (streams, arrival) = delivery else {
            record(.notificationLost, traced)
            return
        }
        record(.notification, traced)
        guard arrival > now else {
            for stream in streams { stream.yield(value) }
            return
        }
        clock.schedule(at: SimulatedClock.Instant(offset: arrival)) {
            for stream in streams { stream.yield(value) }
        }
    }

    /// Ends a connection: its notification streams throw, the server hears of it.
    ///
    /// - Parameters:
    ///   - reason: Why, as the central sees it (`nil`: the central ended it).
    ///   - serverReason: Why, as the server sees it; by default `reason`'s message, or "the central
    ///     ended the link" (what BlueZ 5.83 and later tell a server) when the central ended it.
    func disconnect(
        central: BluetoothAddress, peripheral: BluetoothAddress, reason: BluetoothError?, serverReason: String? = nil
    ) {
        let (removed, subscriptions, events) = state.withLock { state in
            let removed =
                state.connections.remove(RadioState.Connection(central: central, peripheral: peripheral)) != nil
            let keys = state.subscriptions.keys.filter { $0.central == central && $0.peripheral == peripheral }
            var streams: [NotificationStream.Continuation] = []
            for key in keys { streams += state.subscriptions.removeValue(forKey: key)?.values ?? [:].values }
            return (removed, (streams, keys.map(\.attribute)), state.devices[peripheral]?.events)
        }
        let (streams, unsubscribed) = subscriptions
        dropL2CAPChannels(between: central, and: peripheral)
        releaseWriteSockets(between: central, and: peripheral)
        guard removed else { return }
        let why = reason.map { "\($0.code): \($0.message)" } ?? "by the central"
        record(.disconnected, "\(central) → \(peripheral): \(why)")
        connectionStateChanged(
            RadioState.Connection(central: central, peripheral: peripheral), to: .disconnected(reason: reason))
        for stream in streams {
            stream.finish(
                throwing: BluetoothError(.disconnected, message: reason?.message ?? "the peripheral disconnected"))
        }
        // As BlueZ does, a link's end ends its subscriptions at the server.
        for attribute in unsubscribed { events?.subscriptionChanged(Central(address: central), attribute, false) }
        events?.connectionChanged(
            CentralConnectionChange(
                central: Central(address: central), isConnected: false,
                reason: serverReason ?? reason?.message ?? "the central ended the link"))
    }

    /// Tells a connection's state listeners (``Peripheral/connectionStates()``) about a change.
    func connectionStateChanged(_ connection: RadioState.Connection, to newState: Peripheral.ConnectionState) {
        let listeners = state.withLock { Array(($0.connectionListeners[connection] ?? [:]).values) }
        for listener in listeners { listener.yield(newState) }
    }

    /// An adapter powered off loses its connections and scans.
    func poweredOff(_ adapter: BluetoothAddress) {
        let (connections, scans) = state.withLock { state in
            (
                state.connections.filter { $0.central == adapter || $0.peripheral == adapter }
                    .sorted { ($0.central, $0.peripheral) < ($1.central, $1.peripheral) },
                state.scans.filter { $0.value.adapter == adapter }
            )
        }
        for connection in connections {
            disconnect(
                central: connection.central, peripheral: connection.peripheral,
                reason: BluetoothError(.disconnected, message: "the adapter was powered off"))
        }
        let links = state.withLock { state in
            state.channels.values.filter { $0.central == adapter || $0.peripheral == adapter }
        }
        for link in links { dropL2CAPChannels(between: link.central, and: link.peripheral) }
        for scan in scans.values {
            scan.continuation.finish(throwing: BluetoothError(.notPowered, message: "the adapter was powered off"))
        }
    }

    /// Tells an adapter's state listeners about a change.
    func adapterChanged(_ adapter: BluetoothAddress) {
        let (listeners, state) = self.state.withLock { state in
            (
                Array((state.adapterListeners[adapter] ?? [:]).values),
                state.adapters[adapter]?.publicState(discovering: state.scans.values.contains { $0.adapter == adapter })
            )
        }
        guard let state else { return }
        for listener in listeners { listener.yield(state) }
    }

    /// Reports one device to one scan, if the scan still runs and the device still advertises.
    func deliver(_ device: BluetoothAddress, to scanID: UInt64) {
        let delivery = state.withLock { state -> (ScanStream.Continuation, Discovery)? in
            guard let scan = state.scans[scanID], scan.adapter != device,
                state.adapters[scan.adapter]?.isPowered == true, var discovery = state.devices[device]?.discovery,
                scan.filter.matches(discovery)
            else { return nil }
            if let passive = scan.passive, !passive.matches(discovery) { return nil }
            discovery.isNew = state.scans[scanID]!.reported.insert(device).inserted
            guard discovery.isNew || (scan.filter.allowsDuplicates && scan.passive == nil) else { return nil }
            return (scan.continuation, discovery)
        }
        if let (continuation, discovery) = delivery {
            let adapter = state.withLock { $0.scans[scanID]?.adapter } ?? device
            remember(device, by: adapter)
            record(.discovered, "\(adapter) ← \(device)")
            continuation.yield(discovery)
        }
    }
}

extension BluetoothError {
    /// Why a simulated link ended, in the words BlueZ 5.83 and later use for its disconnection
    /// reasons, `peer` naming the other side as the one who hears it.
    static func linkEnded(_ code: Code, peer: String = "the peripheral") -> BluetoothError {
        let message =
            switch code {
            case .peerDisconnected: "\(peer) ended the link"
            case .locallyDisconnected: "this adapter ended the link"
            case .linkTimeout: "the link timed out"
            case .authenticationFailed: "authentication failed"
            default: "the link was lost"
            }
        return BluetoothError(code, message: message)
    }
}
