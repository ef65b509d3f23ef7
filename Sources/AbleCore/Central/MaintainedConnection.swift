import AbleIO

/// A connection Able keeps up: it connects, reconnects after each link loss as a
/// ``ReconnectPolicy`` says, and re-enables the notification subscriptions made through it.
///
/// ```swift
/// let connection = adapter.maintainConnection(to: discovery) { peripheral in
///     // Runs on every connection, before the resumed subscriptions deliver.
///     print("battery", try await peripheral.read(Characteristics.batteryLevel))
/// }
/// for try await event in connection.notifications(of: Characteristics.temperature) {
///     switch event {
///     case .value(let bytes): print(bytes)
///     case .interrupted(let reason): print("gap begins: \(reason.message)")
///     case .enabled: print("receiving (again)")
///     }
/// }
/// ```
///
/// Obtain one with ``Adapter/maintainConnection(to:policy:onConnect:)-(Discovery,_,_)`` (or by
/// address) and end it with ``stop()``, or use
/// ``Adapter/withMaintainedConnection(to:policy:onConnect:isolation:_:)-(Discovery,_,_,_,_)``,
/// which stops it when its body ends. Watch ``connectionStates()`` to see it connect, lose the
/// link, wait and give up. GATT operations go through ``peripheral`` while the state is
/// ``State/connected``.
///
/// Every reason is a ``BluetoothError`` an app can switch on by ``BluetoothError/code``: a link
/// loss is ``BluetoothError/Code/linkTimeout``, ``BluetoothError/Code/peerDisconnected``,
/// ``BluetoothError/Code/locallyDisconnected`` or ``BluetoothError/Code/authenticationFailed``
/// where the backend says why (BlueZ 5.83 and later, the simulated radio), and
/// ``BluetoothError/Code/disconnected`` where it does not.
///
/// - Important: One task drives the connection; cancelling the task that called
///   ``Adapter/withMaintainedConnection(to:policy:onConnect:isolation:_:)-(Discovery,_,_,_,_)``
///   stops it. A connection that is not stopped keeps reconnecting for as long as the process
///   runs (or until its policy gives up).
public final class MaintainedConnection: Sendable {
    /// Where a maintained connection stands.
    public enum State: Sendable, Hashable, CustomStringConvertible {
        /// Attempt `attempt` (1 for the first since the last success) is under way.
        case connecting(attempt: Int)
        /// Connected, services resolved and subscriptions re-enabled.
        case connected
        /// The link was lost, for `reason` (``BluetoothError/Code/disconnected`` when the backend
        /// does not say why); reconnecting follows at once.
        case disconnected(reason: BluetoothError)
        /// Attempt `attempt` failed with `error`; the next one starts after `delay`.
        case waiting(attempt: Int, delay: Duration, error: BluetoothError)
        /// The policy's attempts ran out, or a failure another attempt would meet again happened
        /// (see ``ReconnectPolicy/isTransient(_:)``); nothing more is tried.
        case gaveUp(BluetoothError)
        /// ``MaintainedConnection/stop()`` was called or its task cancelled; disconnected.
        case stopped

        public var description: String {
            switch self {
            case .connecting(let attempt): "connecting (attempt \(attempt))"
            case .connected: "connected"
            case .disconnected(let reason): "disconnected (\(reason.message))"
            case .waiting(let attempt, let delay, let error):
                "attempt \(attempt) failed (\(error)); retrying in \(delay)"
            case .gaveUp(let error): "gave up: \(error)"
            case .stopped: "stopped"
            }
        }

        /// Whether nothing more will happen: ``gaveUp(_:)`` or ``stopped``.
        public var isFinal: Bool {
            switch self {
            case .gaveUp, .stopped: true
            default: false
            }
        }
    }

    /// What a subscription through a maintained connection delivers: values, and the gaps the
    /// link losses leave between them.
    public enum Notification: Sendable, Hashable, CustomStringConvertible {
        /// A value the peripheral notified or indicated.
        case value([UInt8])
        /// Values may be missed from now until ``enabled``: the link was lost (`reason` says why,
        /// as ``State/disconnected(reason:)`` does), the peripheral's services changed
        /// (``BluetoothError/Code/attributeRemoved``), or its notifications ended while the link
        /// stayed up.
        case interrupted(reason: BluetoothError)
        /// Notifications are enabled on the peripheral, the first time or again after a
        /// reconnection: values flow from here.
        case enabled

        public var description: String {
            switch self {
            case .value(let bytes): Hex.string(bytes)
            case .interrupted(let reason): "interrupted (\(reason.message))"
            case .enabled: "enabled"
            }
        }
    }

    /// A stream of ``Notification``s.
    public typealias Notifications = AsyncThrowingStream<Notification, any Error>

    private struct Subscription {
        var characteristic: any CharacteristicIdentifier
        var continuation: Notifications.Continuation
        /// Relays the current link's notification stream; cancelled when the link goes.
        var relay: Task<Void, Never>?
        /// Subscribes again after the values ended under a link that stays up; cancelled when the
        /// link goes. Apart from the relay, so that waiting for a relay to hand over its values
        /// never waits for a retry's pause.
        var retry: Task<Void, Never>?
        /// Which relay is the current one: a relay replaced or cancelled (by a service change that
        /// enabled the subscription again on the same link) must not start a retry when its values end.
        var relayGeneration: UInt64 = 0
        /// Whether the consumer has been told of the current gap.
        var interrupted = false
        /// The link it is enabled on (or being enabled on): never twice on one link.
        var link: Int?
        /// The characteristic as found when it was enabled, to tell whether a service change
        /// removed it.
        var found: RemoteCharacteristic?
    }

    private struct Storage {
        var state: State = .connecting(attempt: 1)
        var stateListeners: [UInt64: AsyncStream<State>.Continuation] = [:]
        var subscriptions: [UInt64: Subscription] = [:]
        var nextID: UInt64 = 0
        var supervisor: Task<Void, Never>?
        var stopRequested = false
        /// Counts the connections made.
        var link = 0
        /// The waits for characteristics a service change removed, by subscription.
        var serviceChangeWaits: [UInt64: Task<Void, Never>] = [:]
    }

    /// The peripheral kept connected; use it for reads and writes while ``State/connected``.
    public let peripheral: Peripheral
    /// The policy it follows.
    public let policy: ReconnectPolicy
    private let sleep: @Sendable (Duration) async throws -> Void
    private let onConnect: (@Sendable (Peripheral) async throws -> Void)?
    private let storage = Lock(Storage())

    init(
        peripheral: Peripheral, policy: ReconnectPolicy, onConnect: (@Sendable (Peripheral) async throws -> Void)?,
        sleep: @escaping @Sendable (Duration) async throws -> Void
    ) {
        self.peripheral = peripheral
        self.policy = policy
        self.onConnect = onConnect
        self.sleep = sleep
    }

    func start() {
        let task = Task.inheritingExecutor { [self] in await supervise() }
        storage.withLock { $0.supervisor = task }
    }

    /// The state now.
    public var state: State { storage.withLock { $0.state } }

    /// The states from now on, starting with the current one, ending after a final state
    /// (``State/gaveUp(_:)`` or ``State/stopped``).
    ///
    /// Buffering: the 64 newest states; a consumer further behind skips the oldest ones.
    /// Cancelling the task that iterates ends the stream.
    public func connectionStates() -> AsyncStream<State> {
        let (stream, continuation) = AsyncStream<State>.makeStream(bufferingPolicy: .bufferingNewest(64))
        storage.withLock { storage in
            continuation.yield(storage.state)
            if storage.state.isFinal {
                continuation.finish()
                return
            }
            storage.nextID += 1
            let id = storage.nextID
            storage.stateListeners[id] = continuation
            continuation.onTermination = { [weak self] _ in
                _ = self?.storage.withLock { $0.stateListeners.removeValue(forKey: id) }
            }
        }
        return stream
    }

    /// Waits until the connection is up, for at most `timeout` (on the adapter's clock).
    ///
    /// - Throws: ``BluetoothError/Code/timeout``; the error it gave up with; ``BluetoothError/Code/cancelled``
    ///   when it was stopped.
    public func waitUntilConnected(timeout: Duration) async throws {
        let states = connectionStates()
        try await withBackendDeadline(timeout, sleep: sleep, what: "connecting to \(peripheral.address)") {
            for await state in states {
                switch state {
                case .connected: return
                case .gaveUp(let error): throw error
                case .stopped: throw BluetoothError(.cancelled, message: "the maintained connection was stopped")
                default: continue
                }
            }
            throw CancellationError()
        }
    }

    /// Subscribes to a characteristic's notifications for as long as the stream is iterated,
    /// across reconnections.
    ///
    /// After each reconnection the subscription is enabled again, once, and the stream says
    /// where values may be missing: ``Notification/interrupted(reason:)`` when the link goes,
    /// ``Notification/enabled`` each time notifications are enabled (the first time too). Values
    /// are never repeated: each link's values come from that link's subscription alone. When the
    /// characteristic goes away under a link that stays up (the peer's GATT application was
    /// unregistered or changed), the stream reports ``Notification/interrupted(reason:)`` and
    /// subscribes again each second while the link lasts; ``Notification/enabled`` says it is back.
    ///
    /// Buffering: up to 4,096 events the consumer has not taken; when full, the oldest are
    /// dropped (a consumer that far behind has a gap of its own making). Each link's values come
    /// through a ``NotificationStream`` first, with its own buffer and drop count.
    ///
    /// Lifetime: the stream ends when iteration ends or its task is cancelled (the subscription
    /// then ends in BlueZ), when the connection is stopped (`nil`), or when it gives up (it
    /// throws the error). A characteristic the peripheral lacks after a reconnection ends the
    /// stream with ``BluetoothError/Code/attributeRemoved`` when an earlier link had it,
    /// ``BluetoothError/Code/doesNotExist`` when none had.
    ///
    /// Service changes: when the peripheral's database changes while connected (see
    /// ``Peripheral/serviceChanges()``), a subscription whose characteristic was removed or moved
    /// reports ``Notification/interrupted(reason:)`` and is enabled again, with
    /// ``Notification/enabled``, as soon as the characteristic is back; one still missing 10 s
    /// (on the adapter's clock) after the change ends with ``BluetoothError/Code/attributeRemoved``.
    /// Subscriptions to characteristics the change left alone go on untouched.
    public func notifications(of characteristic: some CharacteristicIdentifier) -> Notifications {
        let (stream, continuation) = Notifications.makeStream(bufferingPolicy: .bufferingNewest(4096))
        let connected = storage.withLock { storage -> (UInt64, Bool)? in
            switch storage.state {
            case .stopped:
                continuation.finish()
                return nil
            case .gaveUp(let error):
                continuation.finish(throwing: error)
                return nil
            default:
                break
            }
            storage.nextID += 1
            let id = storage.nextID
            storage.subscriptions[id] = Subscription(characteristic: characteristic, continuation: continuation)
            if case .connected = storage.state { return (id, true) }
            return (id, false)
        }
        guard let (id, isConnected) = connected else { return stream }
        continuation.onTermination = { [weak self] _ in
            let relay = self?.storage.withLock { $0.subscriptions.removeValue(forKey: id)?.relay }
            relay?.cancel()
        }
        if isConnected {
            Task.inheritingExecutor { [self] in
                do {
                    try await enable(id)
                } catch {
                    // The link went under it: the next reconnection enables it.
                }
            }
        } else {
            storage.withLock { $0.subscriptions[id]?.interrupted = true }
        }
        return stream
    }

    /// Stops maintaining the connection: no more attempts, the subscriptions' streams end, and the
    /// peripheral is disconnected. Returns once all that is done.
    public func stop() async {
        let supervisor = storage.withLock { storage in
            storage.stopRequested = true
            return storage.supervisor
        }
        supervisor?.cancel()
        await supervisor?.value
    }

    // MARK: The supervisor

    private func supervise() async {
        var failures = 0
        var finalState = State.stopped
        while !Task.isCancelled {
            publish(.connecting(attempt: failures + 1))
            do {
                try await peripheral.connect(timeout: policy.connectTimeout)
                storage.withLock { $0.link += 1 }
                failures = 0
                // Watch the link before anything else, so that a loss during the re-enabling is seen.
                let states = await peripheral.connectionStates()
                // Straight from the backend: no hop onto the peripheral between connecting and
                // reporting the connection.
                let serviceChanges = peripheral.backend.serviceChanges()
                try await enableAll()
                let follower = Task { [self] in
                    for await change in serviceChanges { await servicesChanged(change) }
                }
                let reason =
                    await linkLoss(states)
                    ?? BluetoothError(.disconnected, message: "the link to \(peripheral.address) was lost")
                follower.cancel()
                guard !Task.isCancelled else { break }
                await interruptAll(reason: reason)
                publish(.disconnected(reason: reason))
            } catch {
                guard !Task.isCancelled, !(error is CancellationError) else { break }
                let failure =
                    error as? BluetoothError ?? BluetoothError(.failed, message: "\(error)", cause: error)
                await interruptAll(reason: failure)
                // A link the per-connection set-up failed on is still up: take it down before
                // the next attempt (a link that went meanwhile makes this a no-op).
                if await peripheral.isConnected {
                    await runEvenIfCancelled { [peripheral] in try? await peripheral.disconnect() }
                }
                failures += 1
                if !ReconnectPolicy.isTransient(failure) || failures >= (policy.maximumAttempts ?? .max) {
                    finalState = .gaveUp(failure)
                    break
                }
                let delay = policy.delay(afterFailures: failures)
                publish(.waiting(attempt: failures, delay: delay, error: failure))
                do {
                    try await sleep(delay)
                } catch {
                    break
                }
            }
        }
        await finish(finalState)
    }

    /// Waits until the link is lost (or the task is cancelled); returns the reason.
    private func linkLoss(_ states: AsyncStream<Peripheral.ConnectionState>) async -> BluetoothError? {
        for await state in states {
            if case .disconnected(let reason) = state { return reason }
        }
        return nil
    }

    /// Enables every subscription on the new link, runs the per-connection set-up, then reports the
    /// connection, then starts their relays: a consumer that sees ``Notification/enabled`` finds
    /// the state ``State/connected``, and values the peripheral sent during the set-up wait in
    /// each link's ``NotificationStream`` until then.
    private func enableAll() async throws {
        let ids = storage.withLock { Array($0.subscriptions.keys).sorted() }
        var enabled: [(UInt64, NotificationStream)] = []
        for id in ids {
            if let values = try await subscribe(id) { enabled.append((id, values)) }
        }
        if let onConnect { try await onConnect(peripheral) }
        publish(.connected)
        for (id, values) in enabled { relay(values, to: id) }
    }

    /// Enables one subscription on the current link (a subscription made while connected).
    private func enable(_ id: UInt64) async throws {
        if let values = try await subscribe(id) { relay(values, to: id) }
    }

    /// Subscribes on the current link, unless it is done already; `nil` when there is nothing to relay.
    private func subscribe(_ id: UInt64) async throws -> NotificationStream? {
        let characteristic = storage.withLock { storage -> (any CharacteristicIdentifier)? in
            guard storage.link > 0, storage.subscriptions[id]?.link != storage.link else { return nil }
            storage.subscriptions[id]!.link = storage.link
            return storage.subscriptions[id]!.characteristic
        }
        guard let characteristic else { return nil }
        do {
            let found = try await peripheral.characteristic(characteristic)
            storage.withLock { $0.subscriptions[id]?.found = found }
            return try await peripheral.notifications(of: characteristic)
        } catch let error as BluetoothError
            where error.code == .doesNotExist || error.code == .notSupported || error.code == .attributeRemoved
        {
            // Another attempt would not find it either: this stream ends, the others go on.
            storage.withLock { $0.subscriptions.removeValue(forKey: id) }?.continuation.finish(throwing: error)
            return nil
        }
    }

    /// Re-enables the subscriptions whose characteristic a change of the peripheral's services
    /// removed or moved (BlueZ drops the notification session with the object), once the
    /// characteristic is there again. One the peripheral still lacks ``serviceChangeGrace`` later
    /// ends with ``BluetoothError/Code/attributeRemoved``: a peripheral may change in two steps (a
    /// BlueZ peripheral re-registering its application sends Service Changed for the old range,
    /// then for the new one), and the second can take seconds on a slow link.
    private func servicesChanged(_ change: ServiceChange) async {
        let reason = BluetoothError(.attributeRemoved, message: "\(peripheral.address) changed its services")
        typealias Affected = (UInt64, Notifications.Continuation?, Task<Void, Never>?, Task<Void, Never>?)
        let affected = storage.withLock { storage -> [Affected] in
            var affected: [Affected] = []
            for (id, subscription) in storage.subscriptions {
                let lost = subscription.found.map { found in
                    !change.services.contains { $0.characteristics.contains(found) }
                }
                // Lost now, or waiting since an earlier change (a subscription being enabled for
                // the first time has no link yet either, but has not been interrupted).
                guard lost == true || (subscription.link == nil && subscription.interrupted) else { continue }
                let interrupted = subscription.interrupted
                storage.subscriptions[id]!.interrupted = true
                storage.subscriptions[id]!.link = nil
                storage.subscriptions[id]!.found = nil
                storage.subscriptions[id]!.relay = nil
                storage.subscriptions[id]!.retry = nil
                affected.append(
                    (id, interrupted ? nil : subscription.continuation, subscription.relay, subscription.retry))
            }
            return affected
        }
        for (id, continuation, relay, retry) in affected.sorted(by: { $0.0 < $1.0 }) {
            relay?.cancel()
            retry?.cancel()
            continuation?.yield(.interrupted(reason: reason))
            let characteristic = storage.withLock { $0.subscriptions[id]?.characteristic }
            guard let characteristic else { continue }
            if change.contains(characteristic) {
                do {
                    try await enable(id)
                } catch {
                    // The link went under it: the next reconnection enables it.
                }
            } else {
                let wait = Task { [self] in
                    guard (try? await sleep(Self.serviceChangeGrace)) != nil else { return }
                    let pending = storage.withLock { storage -> Notifications.Continuation? in
                        guard case .connected = storage.state, let subscription = storage.subscriptions[id],
                            subscription.link == nil
                        else { return nil }
                        storage.subscriptions[id] = nil
                        return subscription.continuation
                    }
                    guard let pending else { return }
                    let error = BluetoothError(
                        .attributeRemoved,
                        message: "characteristic \(characteristic.uuid) of service \(characteristic.service.uuid) "
                            + "is gone: \(reason.message)")
                    pending.finish(throwing: error)
                }
                storage.withLock { $0.serviceChangeWaits.updateValue(wait, forKey: id) }?.cancel()
            }
        }
    }

    /// How long a subscription waits for its characteristic to come back after a service change.
    static let serviceChangeGrace = Duration.seconds(10)

    /// Announces `.enabled`, then relays the link's values to the subscription's stream.
    private func relay(_ values: NotificationStream, to id: UInt64) {
        // Announced before the relay starts, so that it precedes this link's values.
        yield(.enabled, to: id)
        let (link, generation) = storage.withLock { storage in
            storage.nextID += 1
            return (storage.link, storage.nextID)
        }
        let relay = Task.inheritingExecutor {
            var reason: BluetoothError?
            do {
                for try await value in values { self.yield(.value(value), to: id) }
            } catch let error as BluetoothError where error.code == .attributeRemoved {
                // The peripheral's services changed: `servicesChanged(_:)` reports the gap and
                // enables the subscription again, or ends it, once the change is complete.
                return
            } catch {
                reason = error as? BluetoothError ?? BluetoothError(.failed, message: "\(error)", cause: error)
            }
            // When the link went, the supervisor reports the gap; when the values ended under a
            // link that stays up for another reason, the characteristic went away without a
            // change of services being seen (the peer's GATT application was unregistered):
            // subscribe again once it is back. The relay itself ends here, so that a link loss's
            // gap is reported as soon as the lost link's values are handed over. A cancelled relay
            // was replaced or its gap is being reported already: it starts nothing.
            guard !Task.isCancelled else { return }
            self.valuesEnded(id, link: link, relay: generation, reason: reason)
        }
        let replaced = storage.withLock { storage -> Task<Void, Never>? in
            guard storage.subscriptions[id] != nil else { return nil }
            let replaced = storage.subscriptions[id]!.relay
            storage.subscriptions[id]!.relay = relay
            storage.subscriptions[id]!.relayGeneration = generation
            storage.subscriptions[id]!.interrupted = false
            return replaced
        }
        replaced?.cancel()
        if storage.withLock({ $0.subscriptions[id] == nil }) { relay.cancel() }
    }

    /// Starts a subscription's retry after the values of its current relay, `generation`, ended on
    /// link `link` (which may be going: the supervisor, learning of a link loss, cancels the retry).
    private func valuesEnded(_ id: UInt64, link: Int, relay generation: UInt64, reason: BluetoothError?) {
        let retry = Task.inheritingExecutor { [self] in await resubscribe(id, link: link, reason: reason) }
        let cancelled = storage.withLock { storage -> Task<Void, Never>? in
            guard storage.link == link, storage.subscriptions[id]?.link == link,
                storage.subscriptions[id]?.relayGeneration == generation
            else { return retry }
            let replaced = storage.subscriptions[id]!.retry
            storage.subscriptions[id]!.retry = retry
            return replaced
        }
        cancelled?.cancel()
    }

    /// After a subscription's values ended while its link stays up: reports the gap, then
    /// subscribes again every ``resubscribeInterval`` for as long as the link lasts, until the
    /// characteristic is back. A link loss in the meantime leaves it to the supervisor.
    private func resubscribe(_ id: UInt64, link: Int, reason: BluetoothError?) async {
        // A link loss ends the values too, and the supervisor learns of it a little later.
        do {
            try await sleep(Self.resubscribeInterval)
        } catch {
            return
        }
        let characteristic = storage.withLock { storage -> (any CharacteristicIdentifier)? in
            guard !Task.isCancelled, storage.link == link, case .connected = storage.state,
                storage.subscriptions[id]?.link == link
            else { return nil }
            storage.subscriptions[id]!.link = nil
            storage.subscriptions[id]!.interrupted = true
            return storage.subscriptions[id]!.characteristic
        }
        guard let characteristic else { return }
        let gap =
            reason
            ?? BluetoothError(
                .disconnected,
                message: "the notifications of \(characteristic.uuid) ended while the link stayed up")
        yield(.interrupted(reason: gap), to: id)
        while true {
            do {
                try await sleep(Self.resubscribeInterval)
            } catch {
                return
            }
            let stillUp = storage.withLock { storage in
                guard storage.link == link, case .connected = storage.state else { return false }
                return storage.subscriptions[id] != nil && storage.subscriptions[id]!.link == nil
            }
            guard stillUp, !Task.isCancelled else { return }
            guard let values = try? await peripheral.notifications(of: characteristic) else { continue }
            let claimed = storage.withLock { storage in
                guard storage.link == link, storage.subscriptions[id]?.link == nil else { return false }
                storage.subscriptions[id]!.link = link
                return true
            }
            // Unclaimed, the stream ends here and its subscription with it.
            guard claimed else { return }
            relay(values, to: id)
            return
        }
    }

    /// How long a subscription whose characteristic went away waits between attempts to subscribe again.
    static let resubscribeInterval = Duration.seconds(1)

    private func yield(_ event: Notification, to id: UInt64) {
        storage.withLock { $0.subscriptions[id]?.continuation }?.yield(event)
    }

    /// Tells every subscription of a gap (once per gap), after the lost link's values it had
    /// received: the lost link's notification streams end (with ``BluetoothError/Code/disconnected``)
    /// once their buffered values are taken, which their relays are given ``relayDrainGrace`` to do.
    private func interruptAll(reason: BluetoothError) async {
        let (interrupted, retries) = storage.withLock { storage in
            var interrupted: [(Notifications.Continuation, Task<Void, Never>?)] = []
            var retries: [Task<Void, Never>] = []
            for id in storage.subscriptions.keys {
                storage.subscriptions[id]!.link = nil
                if let retry = storage.subscriptions[id]!.retry { retries.append(retry) }
                storage.subscriptions[id]!.retry = nil
                guard !storage.subscriptions[id]!.interrupted else { continue }
                storage.subscriptions[id]!.interrupted = true
                interrupted.append((storage.subscriptions[id]!.continuation, storage.subscriptions[id]!.relay))
                storage.subscriptions[id]!.relay = nil
            }
            return (interrupted, retries)
        }
        for retry in retries { retry.cancel() }
        for (continuation, relay) in interrupted {
            if let relay {
                let drained: Bool? = try? await withTimeLimit(Self.relayDrainGrace) {
                    await relay.value
                    return true
                }
                if drained != true { relay.cancel() }
            }
            continuation.yield(.interrupted(reason: reason))
        }
    }

    /// How long a lost link's relay may take to hand over the values it had received.
    static let relayDrainGrace = Duration.seconds(2)

    private func publish(_ state: State) {
        let listeners = storage.withLock { storage -> [AsyncStream<State>.Continuation] in
            // The first attempt's state is the one a new connection starts in: said once.
            guard storage.state != state else { return [] }
            storage.state = state
            return Array(storage.stateListeners.values)
        }
        for listener in listeners { listener.yield(state) }
    }

    private func finish(_ state: State) async {
        let (subscriptions, listeners) = storage.withLock { storage in
            storage.state = state
            for wait in storage.serviceChangeWaits.values { wait.cancel() }
            storage.serviceChangeWaits = [:]
            let subscriptions = Array(storage.subscriptions.values)
            storage.subscriptions = [:]
            let listeners = Array(storage.stateListeners.values)
            storage.stateListeners = [:]
            return (subscriptions, listeners)
        }
        for subscription in subscriptions {
            subscription.relay?.cancel()
            subscription.retry?.cancel()
            if case .gaveUp(let error) = state {
                subscription.continuation.finish(throwing: error)
            } else {
                subscription.continuation.finish()
            }
        }
        for relay in subscriptions.compactMap(\.relay) { await relay.value }
        await runEvenIfCancelled { [peripheral] in try? await peripheral.disconnect() }
        for listener in listeners {
            listener.yield(state)
            listener.finish()
        }
    }
}

extension Adapter {
    /// What runs on every connection of a maintained connection, before its resumed subscriptions
    /// deliver: the peripheral, connected with its services resolved.
    public typealias ConnectionSetUp = @Sendable (Peripheral) async throws -> Void

    /// Keeps the peripheral a scan found connected until ``MaintainedConnection/stop()``:
    /// connects now, and reconnects after each link loss as `policy` says.
    ///
    /// Connecting looks for the device with the address type the scan reported
    /// (``Discovery/addressType``), so a random address is never taken for a public one.
    ///
    /// - Parameters:
    ///   - discovery: The peripheral, as a scan found it.
    ///   - policy: How to reconnect.
    ///   - onConnect: Runs on every connection, once the services are resolved and the
    ///     subscriptions enabled again, before the state becomes ``MaintainedConnection/State/connected``
    ///     and before any subscription reports ``MaintainedConnection/Notification/enabled`` or
    ///     delivers the new link's values (they wait in the link's buffer meanwhile): read a
    ///     battery level, write a configuration, check a firmware version. When it throws, the
    ///     link is taken down and the attempt counts as failed: the error goes through
    ///     ``ReconnectPolicy/isTransient(_:)`` like a failed connection's (an error that is not a
    ///     ``BluetoothError`` is not transient, so the connection gives up with it as
    ///     ``BluetoothError/Code/failed``).
    /// - Returns: The maintained connection, already connecting.
    ///
    /// The corresponding BlueZ methods are `org.bluez.Device1.Connect` and `Disconnect`, and
    /// `GattCharacteristic1.StartNotify` for each subscription after each connection.
    /// - Important: Call ``MaintainedConnection/stop()`` when done, or it runs for as long as the process.
    public nonisolated func maintainConnection(
        to discovery: Discovery, policy: ReconnectPolicy = ReconnectPolicy(), onConnect: ConnectionSetUp? = nil
    ) -> MaintainedConnection {
        maintainConnection(to: peripheral(for: discovery), policy: policy, onConnect: onConnect)
    }

    /// Keeps the peripheral at `address` connected until ``MaintainedConnection/stop()``:
    /// connects now, and reconnects after each link loss as `policy` says.
    ///
    /// The address needs no scan when the adapter knows it (see ``knownPeripherals()``); otherwise
    /// each attempt looks for it, of whatever address type, within the policy's connect timeout.
    ///
    /// - Parameters:
    ///   - address: The peripheral's address.
    ///   - policy: How to reconnect.
    ///   - onConnect: Runs on every connection before the resumed subscriptions deliver; see
    ///     ``maintainConnection(to:policy:onConnect:)-(Discovery,_,_)``.
    /// - Returns: The maintained connection, already connecting.
    ///
    /// The corresponding BlueZ methods are `org.bluez.Device1.Connect` and `Disconnect`, and
    /// `GattCharacteristic1.StartNotify` for each subscription after each connection.
    /// - Important: Call ``MaintainedConnection/stop()`` when done, or it runs for as long as the process.
    public nonisolated func maintainConnection(
        to address: BluetoothAddress, policy: ReconnectPolicy = ReconnectPolicy(), onConnect: ConnectionSetUp? = nil
    ) -> MaintainedConnection {
        maintainConnection(to: peripheral(address: address), policy: policy, onConnect: onConnect)
    }

    private nonisolated func maintainConnection(
        to peripheral: Peripheral, policy: ReconnectPolicy, onConnect: ConnectionSetUp?
    ) -> MaintainedConnection {
        let connection = MaintainedConnection(
            peripheral: peripheral, policy: policy, onConnect: onConnect,
            sleep: { [backend] in try await backend.sleep(for: $0) })
        connection.start()
        return connection
    }

    /// Keeps the peripheral a scan found connected while `body` runs, then stops (disconnecting),
    /// whatever `body` does and even when the task is cancelled.
    ///
    /// ```swift
    /// try await adapter.withMaintainedConnection(to: discovery) { peripheral in
    ///     print("battery", try await peripheral.read(Characteristics.batteryLevel))
    /// } _: { connection in
    ///     for try await event in connection.notifications(of: Characteristics.heartRate) {
    ///         print(event)
    ///     }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - discovery: The peripheral, as a scan found it.
    ///   - policy: How to reconnect.
    ///   - onConnect: Runs on every connection before the resumed subscriptions deliver; see
    ///     ``maintainConnection(to:policy:onConnect:)-(Discovery,_,_)``.
    ///   - isolation: Where `body` runs; the caller's actor by default.
    ///   - body: What to do with the maintained connection.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` throws.
    public func withMaintainedConnection<T>(
        to discovery: Discovery, policy: ReconnectPolicy = ReconnectPolicy(), onConnect: ConnectionSetUp? = nil,
        isolation: isolated (any Actor)? = #isolation, _ body: (MaintainedConnection) async throws -> sending T
    ) async throws -> sending T {
        try await run(maintainConnection(to: discovery, policy: policy, onConnect: onConnect), body)
    }

    /// Keeps the peripheral at `address` connected while `body` runs, then stops (disconnecting),
    /// whatever `body` does and even when the task is cancelled.
    ///
    /// - Parameters:
    ///   - address: The peripheral's address.
    ///   - policy: How to reconnect.
    ///   - onConnect: Runs on every connection before the resumed subscriptions deliver; see
    ///     ``maintainConnection(to:policy:onConnect:)-(Discovery,_,_)``.
    ///   - isolation: Where `body` runs; the caller's actor by default.
    ///   - body: What to do with the maintained connection.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` throws.
    public func withMaintainedConnection<T>(
        to address: BluetoothAddress, policy: ReconnectPolicy = ReconnectPolicy(), onConnect: ConnectionSetUp? = nil,
        isolation: isolated (any Actor)? = #isolation, _ body: (MaintainedConnection) async throws -> sending T
    ) async throws -> sending T {
        try await run(maintainConnection(to: address, policy: policy, onConnect: onConnect), body)
    }

    /// Runs `body` with `connection`, then stops it, even when the task is cancelled.
    private func run<T>(
        _ connection: MaintainedConnection, isolation: isolated (any Actor)? = #isolation,
        _ body: (MaintainedConnection) async throws -> sending T
    ) async throws -> sending T {
        do {
            let result = try await body(connection)
            await runEvenIfCancelled { await connection.stop() }
            return result
        } catch {
            await runEvenIfCancelled { await connection.stop() }
            throw error
        }
    }
}
