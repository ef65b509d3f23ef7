import AbleIO
import CDBus
import CLinux

#if canImport(Glibc)
    import Glibc
#endif

/// Everything of one connection that touches libdbus. Confined to the connection's event loop:
/// every method runs on its thread (libdbus callbacks arrive there, and the actor's executor is
/// the loop).
///
/// The state that every message touches is `@exclusivity(unchecked)`: the runtime's check of each
/// access (a call into the runtime and a thread-local lookup, about 15 per notified value) guards
/// against an access that overlaps another on the same thread, and none can here. Every access to
/// these properties is on the loop and ends before any code of a subscriber or a handler runs:
/// the string caches are modified only inside their own lookups, and the lists are copied before
/// they are walked.
final class ConnectionCore: @unchecked Sendable {
    let raw: OpaquePointer
    let loop: EventLoop
    let log: @Sendable (String) -> Void
    @exclusivity(unchecked) private(set) var closedError: DBusError?

    // Watches and timeouts.
    /// libdbus's enabled timeouts and their deadlines (`CLOCK_MONOTONIC` nanoseconds).
    private var timeouts: [OpaquePointer: UInt64] = [:]
    private var timer: LoopTimer?
    private var dispatchScheduled = false
    /// Whether a watch's handler is inside `dbus_watch_handle`, and so dispatches right after it.
    private var handlingWatch = false
    private let batch = DeliveryBatch()
    /// The header fields of recent signals and method calls, reused by the next messages that
    /// repeat them.
    @exclusivity(unchecked) var headerStrings = RecentStrings(capacity: 16)
    /// The long strings and object paths in the bodies of recent messages: the device path of
    /// each of `bluetoothd`'s requests, the interface of each `PropertiesChanged`. Kept apart
    /// from ``headerStrings``, so that varied body strings do not push header fields out.
    @exclusivity(unchecked) var bodyStrings: RecentStrings? = RecentStrings(capacity: 8)

    // Calls awaiting replies.
    /// The calls sent and not yet answered, by their serial, which their replies name. Able matches
    /// replies itself rather than through libdbus's `DBusPendingCall`s: a pending call costs libdbus
    /// an allocation, a timeout and a ready-made `NoReply` error message per call, and its reply a
    /// pass through `dbus_connection_dispatch`; here a call costs one dictionary entry.
    private var pendingCalls: [UInt32: PendingCall] = [:]

    /// How many calls may await replies from other connections at once; see
    /// ``DBusConnection/maximumOutstandingCalls``.
    var maximumOutstandingCalls = ConnectionCore.defaultMaximumOutstandingCalls
    /// Below dbus-daemon's default `max_replies_per_connection` (128), which Debian's system bus
    /// keeps: the margin covers calls abandoned here (timed out or cancelled) that the daemon still
    /// counts until their late replies come.
    static let defaultMaximumOutstandingCalls = 100
    /// The entries of ``pendingCalls`` that count against ``maximumOutstandingCalls``.
    private var outstandingCalls = 0
    /// The calls waiting for their turn, first come first sent.
    private var waitingCalls = WaitingCalls()

    /// The match rules installed in the bus daemon, by their text, each shared by every subscriber
    /// with that rule (and by the following of a well-known name): the daemon keeps at most 512 per
    /// connection (`max_match_rules_per_connection`).
    var matchRules: [String: MatchRuleUse] = [:]

    private struct PendingCall {
        let reply: PendingReply
        /// Whether it counts against ``maximumOutstandingCalls``.
        let counted: Bool
        /// Whom the reply must come from: see `expectedSender(destination:)`.
        let sender: ExpectedSender?
        /// When the call fails with `NoReply` (`CLOCK_MONOTONIC` nanoseconds); `nil` for never.
        let deadline: UInt64?
        let timeoutMilliseconds: Int32
    }

    /// The destination of a call and the unique name that owned it when the call was sent.
    struct ExpectedSender {
        var destination: String
        var owner: String
    }

    // Signal subscribers.
    private var nextSubscriberID: UInt64 = 0
    /// In the order they subscribed; a class each, so that routing a signal retains one
    /// reference per subscriber rather than copying its rule.
    @exclusivity(unchecked) private var subscribers: [SignalSubscriber] = []
    @exclusivity(unchecked) private var trackedNames: [String: TrackedName] = [:]

    // Exported objects.
    var exports = ExportTable()

    /// Where every outgoing message goes instead of libdbus, for a connection attached to no bus
    /// (see ``DBusConnection/detached(raw:uniqueName:executor:log:outbox:)``); `nil` on a bus.
    /// Set before the connection is used.
    var outbox: (@Sendable (OpaquePointer) -> Void)?
    /// The serial of the last message handed to ``outbox``.
    private var lastOutboxSerial: UInt32 = 0

    final class SignalSubscriber {
        let id: UInt64
        let rule: DBusMatchRule
        let sink: any SignalReceiver
        /// The followed owner of the rule's well-known sender, once looked up: it lives as long as
        /// the subscription that follows it.
        var trackedSender: TrackedName?

        init(id: UInt64, rule: DBusMatchRule, sink: any SignalReceiver) {
            self.id = id
            self.rule = rule
            self.sink = sink
        }
    }

    /// A followed well-known name; a class, so that subscribers keep it at hand.
    final class TrackedName {
        var owner: String?
        var references: Int
        /// Whether a `NameOwnerChanged` was seen, which is newer than any `GetNameOwner` answer.
        var changed = false

        init(owner: String?, references: Int) {
            self.owner = owner
            self.references = references
        }
    }

    /// Keeps `loop` running until the connection is torn down.
    init(raw: OpaquePointer, loop: EventLoop, log: @escaping @Sendable (String) -> Void) {
        self.raw = raw
        self.loop = loop
        self.log = log
        loop.retainClient()
    }

    /// Whether the caller runs on the connection's event loop.
    var isOnLoop: Bool { loop.isOnLoop }

    // MARK: - Setting up and tearing down

    /// Hooks libdbus's watches, timeouts and dispatch onto the loop.
    func start() {
        loop.checkIsolated()
        let context = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_set_exit_on_disconnect(raw, 0)
        dbus_connection_set_watch_functions(
            raw,
            { watch, context in
                Unmanaged<ConnectionCore>.fromOpaque(context!).takeUnretainedValue().addWatch(watch!)
                return 1
            },
            { watch, context in
                Unmanaged<ConnectionCore>.fromOpaque(context!).takeUnretainedValue().removeWatch(watch!)
            },
            { watch, context in
                Unmanaged<ConnectionCore>.fromOpaque(context!).takeUnretainedValue().toggleWatch(watch!)
            },
            context, nil)
        dbus_connection_set_timeout_functions(
            raw,
            { timeout, context in
                Unmanaged<ConnectionCore>.fromOpaque(context!).takeUnretainedValue().addTimeout(timeout!)
                return 1
            },
            { timeout, context in
                Unmanaged<ConnectionCore>.fromOpaque(context!).takeUnretainedValue().removeTimeout(timeout!)
            },
            { timeout, context in
                Unmanaged<ConnectionCore>.fromOpaque(context!).takeUnretainedValue().toggleTimeout(timeout!)
            },
            context, nil)
        dbus_connection_set_dispatch_status_function(
            raw,
            { _, status, context in
                guard status == DBUS_DISPATCH_DATA_REMAINS else { return }
                Unmanaged<ConnectionCore>.fromOpaque(context!).takeUnretainedValue().scheduleDispatch()
            }, context, nil)
        dbus_connection_set_wakeup_main_function(
            raw,
            { context in Unmanaged<ConnectionCore>.fromOpaque(context!).takeUnretainedValue().scheduleDispatch() },
            context, nil)
        scheduleDispatch()
    }

    /// Closes the connection; the `Disconnected` message that follows fails everything pending.
    func close() {
        loop.checkIsolated()
        guard closedError == nil else { return }
        dbus_connection_close(raw)
        dispatchAll()
        if closedError == nil { connectionLost(DBusError(.disconnected, "the connection was closed")) }
    }

    /// Detaches from libdbus and releases the connection. Runs once, after the connection is closed.
    private func teardown() {
        dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
        dbus_connection_set_wakeup_main_function(raw, nil, nil, nil)
        if let timer { loop.remove(timer) }
        timer = nil
        timeouts.removeAll()
        let raw = self.raw
        // Unreferencing frees the filter's context pointer use; keep `self` alive until then.
        withExtendedLifetime(self) { dbus_connection_unref(raw) }
        loop.releaseClient()
    }

    private func connectionLost(_ error: DBusError) {
        guard closedError == nil else { return }
        closedError = error
        let calls = pendingCalls
        pendingCalls.removeAll()
        outstandingCalls = 0
        for call in calls.values { call.reply.resume(with: .failure(error)) }
        for call in waitingCalls.removeAll() {
            dbus_message_unref(call.message)
            call.reply.resume(with: .failure(error))
        }
        let sinks = subscribers.map(\.sink)
        subscribers.removeAll()
        for sink in sinks { sink.finish(throwing: error) }
        exports.removeAll()
        // libdbus may still be inside a callback of ours: detach on the next turn of the loop.
        loop.execute { self.teardown() }
    }

    // MARK: - Watches, timeouts, dispatch

    private func addWatch(_ watch: OpaquePointer) {
        let flags = dbus_watch_get_flags(watch)
        let writable = flags & DBUS_WATCH_READABLE.rawValue == 0
        let watched = writable ? DBUS_WATCH_WRITABLE.rawValue : DBUS_WATCH_READABLE.rawValue
        let loopWatch = LoopWatch(descriptor: dbus_watch_get_unix_fd(watch), writable: writable) {
            [unowned self] events in
            guard closedError == nil else { return }
            var handled = watched
            if events & EPOLLERR.rawValue != 0 { handled |= DBUS_WATCH_ERROR.rawValue }
            if events & EPOLLHUP.rawValue != 0 { handled |= DBUS_WATCH_HANGUP.rawValue }
            handlingWatch = true
            dbus_watch_handle(watch, handled)
            handlingWatch = false
            dispatchAll()
        }
        guard let loopWatch else {
            log("could not watch the connection's socket: errno \(errno)")
            return
        }
        dbus_watch_set_data(watch, Unmanaged.passRetained(loopWatch).toOpaque()) { data in
            Unmanaged<LoopWatch>.fromOpaque(data!).release()
        }
        loop.setEnabled(loopWatch, dbus_watch_get_enabled(watch) != 0)
    }

    private func removeWatch(_ watch: OpaquePointer) {
        guard let data = dbus_watch_get_data(watch) else { return }
        loop.remove(Unmanaged<LoopWatch>.fromOpaque(data).takeUnretainedValue())
        dbus_watch_set_data(watch, nil, nil)
    }

    /// How many calls await replies, subscribers are registered and well-known names are followed.
    var resourceCounts: (pendingCalls: Int, subscribers: Int, trackedNames: Int) {
        (pendingCalls.count + waitingCalls.count, subscribers.count, trackedNames.count)
    }

    /// How many calls await their replies from other connections, and how many wait for their turn.
    var callCounts: (outstanding: Int, waiting: Int) { (outstandingCalls, waitingCalls.count) }

    private func toggleWatch(_ watch: OpaquePointer) {
        guard let data = dbus_watch_get_data(watch) else { return }
        loop.setEnabled(Unmanaged<LoopWatch>.fromOpaque(data).takeUnretainedValue(), dbus_watch_get_enabled(watch) != 0)
    }

    private func addTimeout(_ timeout: OpaquePointer) {
        guard dbus_timeout_get_enabled(timeout) != 0 else { return }
        let deadline = LoopTimer.now() + Self.nanoseconds(of: timeout)
        timeouts[timeout] = deadline
        arm(at: deadline)
    }

    /// Makes the timer fire at `deadline` at the latest. It is never moved later: a timer that
    /// fires for a deadline that went away finds nothing due and rearms for the next one, which
    /// is cheaper than looking for the next deadline whenever one goes.
    private func arm(at deadline: UInt64) {
        let timer = self.timer ?? makeTimer()
        if let current = timer.deadline, current <= deadline { return }
        timer.deadline = deadline
    }

    private static func nanoseconds(of timeout: OpaquePointer) -> UInt64 {
        nanoseconds(milliseconds: dbus_timeout_get_interval(timeout))
    }

    private static func nanoseconds(milliseconds: Int32) -> UInt64 {
        UInt64(max(milliseconds, 0)) * 1_000_000
    }

    private func removeTimeout(_ timeout: OpaquePointer) {
        timeouts[timeout] = nil
    }

    private func toggleTimeout(_ timeout: OpaquePointer) {
        removeTimeout(timeout)
        addTimeout(timeout)
    }

    private func makeTimer() -> LoopTimer {
        let timer = LoopTimer { [unowned self] in timerFired() }
        loop.add(timer)
        self.timer = timer
        return timer
    }

    private func timerFired() {
        let now = LoopTimer.now()
        let expired = timeouts.filter { $0.value <= now }.map(\.key)
        for timeout in expired where timeouts[timeout] != nil {
            // A libdbus timeout repeats until it is removed or disabled.
            timeouts[timeout] = now + Self.nanoseconds(of: timeout)
            dbus_timeout_handle(timeout)
        }
        let overdue = pendingCalls.filter { $0.value.deadline.map { $0 <= now } ?? false }
        for (serial, call) in overdue {
            removePendingCall(serial)
            call.reply.resume(
                with: .failure(DBusError(.noReply, "no reply came within \(call.timeoutMilliseconds) ms")))
        }
        for call in waitingCalls.removeAll(where: { $0.deadline.map { $0 <= now } ?? false }) {
            dbus_message_unref(call.message)
            call.reply.resume(
                with: .failure(
                    DBusError(
                        .noReply,
                        "no reply came within \(call.timeoutMilliseconds) ms: the call waited for its turn all along "
                            + "(\(maximumOutstandingCalls) calls awaited their replies)")))
        }
        let next = min(
            timeouts.values.min() ?? .max, pendingCalls.values.compactMap(\.deadline).min() ?? .max,
            waitingCalls.earliestDeadline ?? .max)
        if next != .max { arm(at: next) }
        dispatchAll()
    }

    func scheduleDispatch() {
        guard !dispatchScheduled, !handlingWatch else { return }
        dispatchScheduled = true
        loop.execute { [self] in
            dispatchScheduled = false
            dispatchAll()
        }
    }

    /// Dispatches every message libdbus has read, as one ``DeliveryBatch``: a stream's consumer
    /// is woken once for all the signals it received, not once per signal.
    ///
    /// Every message is taken off libdbus's queue and routed here, in arrival order: signals to
    /// their subscribers, replies to their calls, method calls to the exported objects (and
    /// `org.freedesktop.DBus.Peer`'s, which libdbus would answer, answered here).
    /// `dbus_connection_dispatch` is not used: it would copy the filter list and look for a
    /// pending call on every message, and Able keeps neither.
    ///
    /// Returns whether everything it dispatched (if anything) was a signal.
    @discardableResult
    func dispatchAll() -> Bool {
        var others = false
        batch.run {
            while closedError == nil, let message = dbus_connection_pop_message(raw) {
                defer { dbus_message_unref(message) }
                if route(message) { others = true }
            }
        }
        return !others
    }

    /// Handles one received message; returns whether it was a reply or a method call.
    private func route(_ message: OpaquePointer) -> Bool {
        switch dbus_message_get_type(message) {
        case ABLE_DBUS_MESSAGE_TYPE_SIGNAL:
            routeSignal(message)
        case ABLE_DBUS_MESSAGE_TYPE_METHOD_RETURN, ABLE_DBUS_MESSAGE_TYPE_ERROR:
            complete(reply: message)
            return true
        case ABLE_DBUS_MESSAGE_TYPE_METHOD_CALL:
            handleMethodCall(message)
            return true
        default:
            // A type newer than this code: the specification says to ignore it.
            break
        }
        return false
    }

    /// Handles `message` as if the bus had delivered it, for a connection attached to no bus.
    func deliver(_ message: OpaquePointer) {
        loop.checkIsolated()
        guard closedError == nil else { return }
        batch.run { _ = route(message) }
    }

    /// Queues `message` on the connection, or hands it to ``outbox``; sets `serial` to its serial.
    private func transmit(_ message: OpaquePointer, serial: inout UInt32) -> Bool {
        guard let outbox else { return dbus_connection_send(raw, message, &serial) != 0 }
        lastOutboxSerial = lastOutboxSerial == .max ? 1 : lastOutboxSerial + 1
        serial = lastOutboxSerial
        dbus_message_set_serial(message, serial)
        outbox(message)
        return true
    }

    // MARK: - Sending

    /// Sends `message` (which this call consumes a reference of), a call to `destination`, and
    /// arranges for `reply` to be resumed with the answer, or with a `NoReply` error after
    /// `timeoutMilliseconds` (`DBUS_TIMEOUT_INFINITE` for never).
    ///
    /// A call to another connection waits for its turn while ``maximumOutstandingCalls`` calls
    /// await their replies; its timeout runs from now, its wait included.
    func send(
        _ message: OpaquePointer, to destination: String?, replyTo reply: PendingReply, timeoutMilliseconds: Int32
    ) {
        loop.checkIsolated()
        if let closedError {
            dbus_message_unref(message)
            reply.resume(with: .failure(closedError))
            return
        }
        let deadline: UInt64? =
            timeoutMilliseconds == ABLE_DBUS_TIMEOUT_INFINITE
            ? nil : LoopTimer.now() + Self.nanoseconds(milliseconds: timeoutMilliseconds)
        // The bus daemon answers its own methods at once and counts only the replies that other
        // connections owe (`bus_connections_expect_reply`); a peer-to-peer connection has no daemon.
        let counted = destination != nil && destination != "org.freedesktop.DBus"
        if counted && (outstandingCalls >= maximumOutstandingCalls || !waitingCalls.isEmpty) {
            waitingCalls.append(
                WaitingCall(
                    message: message, destination: destination, reply: reply, deadline: deadline,
                    timeoutMilliseconds: timeoutMilliseconds))
            if let deadline { arm(at: deadline) }
            return
        }
        transmit(
            message, to: destination, replyTo: reply, counted: counted, deadline: deadline,
            timeoutMilliseconds: timeoutMilliseconds)
    }

    private func transmit(
        _ message: OpaquePointer, to destination: String?, replyTo reply: PendingReply, counted: Bool,
        deadline: UInt64?, timeoutMilliseconds: Int32
    ) {
        defer { dbus_message_unref(message) }
        var serial: UInt32 = 0
        guard transmit(message, serial: &serial) else {
            reply.resume(with: .failure(DBusError(.noMemory, "could not queue the call")))
            return
        }
        // A connection that is already lost answers the call when its `Disconnected` message is
        // dispatched, which is still to come: replies and that message are dispatched on this loop.
        reply.serial = serial
        pendingCalls[serial] = PendingCall(
            reply: reply, counted: counted, sender: expectedSender(destination: destination), deadline: deadline,
            timeoutMilliseconds: timeoutMilliseconds)
        if counted { outstandingCalls += 1 }
        if let deadline { arm(at: deadline) }
    }

    /// Forgets a call awaiting its reply, and lets the next waiting calls go out in its place.
    @discardableResult
    private func removePendingCall(_ serial: UInt32) -> PendingCall? {
        guard let call = pendingCalls.removeValue(forKey: serial) else { return nil }
        if call.counted {
            outstandingCalls -= 1
            sendWaitingCalls()
        }
        return call
    }

    /// Sends the calls that waited for their turn, oldest first, while there is room; drops those
    /// whose callers gave up.
    private func sendWaitingCalls() {
        while closedError == nil, outstandingCalls < maximumOutstandingCalls, let call = waitingCalls.first {
            if !call.reply.isFinished, let deadline = call.deadline, deadline <= LoopTimer.now() {
                // The timer fails it in a moment, as it does every overdue call.
                arm(at: deadline)
                return
            }
            _ = waitingCalls.popFirst()
            guard !call.reply.isFinished else {
                dbus_message_unref(call.message)
                continue
            }
            transmit(
                call.message, to: call.destination, replyTo: call.reply, counted: true, deadline: call.deadline,
                timeoutMilliseconds: call.timeoutMilliseconds)
        }
    }

    /// Changes ``maximumOutstandingCalls``; a higher limit sends waiting calls at once.
    func setMaximumOutstandingCalls(_ limit: Int) {
        maximumOutstandingCalls = max(1, limit)
        sendWaitingCalls()
    }

    /// Resumes the call that `message` (a method return or an error) answers; a reply that answers
    /// no call waiting here (its call timed out or was cancelled) is dropped.
    private func complete(reply message: OpaquePointer) {
        guard let call = removePendingCall(dbus_message_get_reply_serial(message)) else { return }
        if let refusal = refusal(of: message, expectedSender: call.sender) {
            log(refusal.message)
            call.reply.resume(with: .failure(refusal))
        } else {
            call.reply.resume(with: Self.decodeReply(message, strings: &bodyStrings))
        }
    }

    /// Drops a cancelled call: its late reply, if any, is discarded.
    func cancel(_ reply: PendingReply) {
        guard reply.serial != 0 else {
            // Still waiting for its turn (or never sent).
            for call in waitingCalls.removeAll(where: { $0.reply === reply }) { dbus_message_unref(call.message) }
            return
        }
        guard pendingCalls[reply.serial]?.reply === reply else { return }
        removePendingCall(reply.serial)
    }

    /// Whom a call's reply must come from: its destination when that is a unique name, or the
    /// owner this connection follows for a well-known one; `nil` when that is not known.
    private func expectedSender(destination: String?) -> ExpectedSender? {
        guard let destination else { return nil }
        let owner = destination.hasPrefix(":") ? destination : trackedNames[destination]?.owner
        return owner.map { ExpectedSender(destination: destination, owner: $0) }
    }

    /// An error when `reply` came from another connection than the call went to, which libdbus,
    /// matching replies by serial alone, does not check: on a bus that routes unrequested replies
    /// (dbus-daemon's `send_requested_reply`), any process could answer in the callee's place.
    /// Replies libdbus makes itself (a timeout) carry no sender; the bus daemon's own (the callee
    /// is gone) come from `org.freedesktop.DBus`; a well-known name may have changed owners
    /// since the call was sent.
    private func refusal(of reply: OpaquePointer, expectedSender expected: ExpectedSender?) -> DBusError? {
        guard let expected, let sender = dbus_message_get_sender(reply).map({ headerStrings.string($0) }),
            sender != expected.owner, sender != "org.freedesktop.DBus",
            sender != trackedNames[expected.destination]?.owner
        else { return nil }
        return DBusError(
            .accessDenied,
            "a reply from \(sender) was refused: the call to \(expected.destination) went to \(expected.owner)")
    }

    static func decodeReply(
        _ message: OpaquePointer, strings: inout RecentStrings?
    ) -> Result<[DBusValue], any Error> {
        let arguments = Result { () throws(DBusError) in
            try MessageCoding.decodeArguments(of: message, strings: &strings)
        }
        guard dbus_message_get_type(message) == ABLE_DBUS_MESSAGE_TYPE_ERROR else { return arguments.mapError { $0 } }
        let name = dbus_message_get_error_name(message).map { String(cString: $0) } ?? DBusError.Name.failed.rawValue
        // An error's text is its first argument, when that is a string.
        guard case .success(let values) = arguments, case .string(let text)? = values.first else {
            return .failure(DBusError(DBusError.Name(rawValue: name), ""))
        }
        return .failure(DBusError(DBusError.Name(rawValue: name), text))
    }

    /// Sends a message that expects no reply (a signal, a reply, or a call flagged no-reply).
    func sendWithoutReply(_ message: OpaquePointer) {
        defer { dbus_message_unref(message) }
        guard closedError == nil else { return }
        var serial: UInt32 = 0
        _ = transmit(message, serial: &serial)
    }

    // MARK: - Receiving

    private func routeSignal(_ message: OpaquePointer) {
        let interface = dbus_message_get_interface(message).map { headerStrings.string($0) } ?? ""
        let member = dbus_message_get_member(message).map { headerStrings.string($0) } ?? ""
        if interface == "org.freedesktop.DBus.Local" && member == "Disconnected" {
            connectionLost(DBusError(.disconnected, "the connection to the bus was lost"))
            return
        }
        let sender = dbus_message_get_sender(message).map { headerStrings.string($0) } ?? ""
        let pathText = dbus_message_get_path(message).map { headerStrings.string($0) } ?? "/"
        let view = DBusSignalView(
            message: message, sender: sender, path: pathText, interface: interface, member: member)
        // Decoded once, at the first taker of decoded signals: a signal read only in place (every
        // notified value) is never decoded. A plain optional, read in place where it is handed
        // on: wrapping it in a `Result` or a closure copied the signal (a retain of each of its
        // strings and of its arguments) once more per taker.
        var decoded: DBusSignal?
        if member == "NameOwnerChanged" && sender == "org.freedesktop.DBus" {
            decoded = try? view.decoded(strings: &bodyStrings)
            if let arguments = decoded?.arguments { noteNameOwnerChange(arguments) }
        }
        guard !subscribers.isEmpty else { return }
        var argument: (index: Int, value: String?)?
        func stringArgument(_ index: Int) -> String? {
            if let argument, argument.index == index { return argument.value }
            let value = view.stringArgument(index, interning: &headerStrings)
            argument = (index, value)
            return value
        }
        for subscriber in subscribers {
            guard
                subscriber.rule.matches(
                    sender: sender, path: pathText, interface: interface, member: member,
                    argument: stringArgument,
                    senderOwner: { name in
                        if let tracked = subscriber.trackedSender { return tracked.owner }
                        subscriber.trackedSender = trackedNames[name]
                        return subscriber.trackedSender?.owner
                    })
            else { continue }
            if subscriber.sink.readsInPlace {
                subscriber.sink.receive(view)
                continue
            }
            if decoded == nil {
                do throws(DBusError) {
                    decoded = try view.decoded(strings: &bodyStrings)
                } catch {
                    log("dropped a malformed \(interface).\(member) signal from \(sender): \(error)")
                    return
                }
            }
            subscriber.sink.yield(decoded!)
        }
    }

    // MARK: - Subscriptions

    func addSubscriber(_ rule: DBusMatchRule, sink: any SignalReceiver) -> UInt64 {
        nextSubscriberID += 1
        subscribers.append(SignalSubscriber(id: nextSubscriberID, rule: rule, sink: sink))
        return nextSubscriberID
    }

    /// Removes a subscriber; returns whether it was still there.
    @discardableResult
    func removeSubscriber(_ id: UInt64) -> Bool {
        guard let index = subscribers.firstIndex(where: { $0.id == id }) else { return false }
        subscribers.remove(at: index)
        return true
    }

    /// Starts following the owner of a well-known name; returns whether this is the first reference.
    func trackName(_ name: String) -> Bool {
        if let tracked = trackedNames[name] {
            tracked.references += 1
            return false
        }
        trackedNames[name] = TrackedName(owner: nil, references: 1)
        return true
    }

    /// Stops following a name; returns whether this was the last reference.
    func untrackName(_ name: String) -> Bool {
        guard let tracked = trackedNames[name] else { return false }
        tracked.references -= 1
        if tracked.references == 0 { trackedNames[name] = nil }
        return tracked.references == 0
    }

    /// Records the owner `GetNameOwner` reported, unless a `NameOwnerChanged` overtook it.
    func setOwner(_ owner: String?, of name: String) {
        guard trackedNames[name]?.changed == false else { return }
        trackedNames[name]?.owner = owner
    }

    private func noteNameOwnerChange(_ arguments: [DBusValue]) {
        guard arguments.count == 3, case .string(let name) = arguments[0], trackedNames[name] != nil,
            case .string(let newOwner) = arguments[2]
        else { return }
        trackedNames[name]?.owner = newOwner.isEmpty ? nil : newOwner
        trackedNames[name]?.changed = true
    }
}
