import AbleIO
import CDBus
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// A connection to a D-Bus message bus.
///
/// A connection runs on an event loop (its ``executor``): the loop's thread reads, writes and
/// dispatches, calls the handlers of exported objects and signal subscriptions, and runs the
/// actor. By default every connection of the process shares one loop, ``DBusExecutor/shared``,
/// so no thread is dedicated to a connection. The socket is read whenever it is readable, and
/// everything one read brought is dispatched as one batch (a stream's consumer is woken once
/// for all the signals it got).
///
/// ```swift
/// let bus = try await DBusConnection.connect(to: .system)
/// let reply = try await bus.call(
///     destination: "org.bluez", path: "/", interface: "org.freedesktop.DBus.ObjectManager",
///     method: "GetManagedObjects")
/// ```
///
/// - Important: When the bus goes away (the daemon dies or ``close()`` is called), every call
///   in flight throws a ``DBusError`` named ``DBusError/Name/disconnected``, every signal stream
///   ends with that error, and later calls throw it at once. A closed connection stays closed:
///   connect again to go on.
///
/// ## The bus's limits
///
/// A bus daemon limits what one connection may hold; Debian's system bus keeps dbus-daemon's
/// defaults: 128 method calls awaiting replies (`max_replies_per_connection`) and 512 match rules
/// (`max_match_rules_per_connection`). Beyond them the daemon refuses with
/// ``DBusError/Name/limitsExceeded``. A connection stays within both:
///
/// - At most 100 method calls to other connections await their replies at once (calls to the bus
///   daemon itself do not count, as the daemon does not count them). The next calls wait for
///   their turn, first come first sent; a waiting call's timeout runs from when it was made, its
///   wait included, and cancelling its task takes it out of the line at once. The margin below
///   128 covers calls given up here (timed out or cancelled), which the daemon counts until their
///   replies come.
/// - Subscriptions with the same ``DBusMatchRule`` share one rule in the daemon: it is added
///   for the first and removed after the last.
///
/// The actor keeps no state besides its internal core, and its executor is the connection's
/// event loop: that is what it is for, since an isolated method then runs where libdbus and the
/// core may be touched, without a lock. A call made from a task already on the loop is sent,
/// and resumed by its reply, without leaving the loop's thread.
public actor DBusConnection {
    /// Which bus to connect to.
    public struct Bus: Sendable, CustomStringConvertible {
        enum Kind: Sendable {
            case system, session
            case address(String)
        }
        let kind: Kind

        /// The system bus, where `bluetoothd` lives (`DBUS_SYSTEM_BUS_ADDRESS` or the standard socket).
        public static let system = Bus(kind: .system)
        /// The user's session bus (`DBUS_SESSION_BUS_ADDRESS`).
        public static let session = Bus(kind: .session)
        /// A bus daemon at a D-Bus address such as `unix:path=/tmp/test-bus`.
        public static func address(_ address: String) -> Bus { Bus(kind: .address(address)) }

        public var description: String {
            switch kind {
            case .system: "system bus"
            case .session: "session bus"
            case .address(let address): address
            }
        }
    }

    /// The event loop this connection runs on, which actors can share.
    public nonisolated let executor: DBusExecutor

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        executor.asUnownedSerialExecutor()
    }

    /// The unique name the bus gave this connection, for example `:1.42`.
    public nonisolated let uniqueName: String

    let core: ConnectionCore

    private init(core: ConnectionCore, executor: DBusExecutor, uniqueName: String) {
        self.core = core
        self.executor = executor
        self.uniqueName = uniqueName
    }

    deinit {
        let core = self.core
        core.loop.execute { core.close() }
    }

    /// Connects to a bus and registers with it (the `Hello` call).
    ///
    /// - Parameters:
    ///   - bus: The bus to connect to.
    ///   - executor: The event loop to run on: by default the one all connections share; give a
    ///     `DBusExecutor()` for a loop (and thread) of the connection's own.
    ///   - log: Where the connection reports what it refused or dropped (calls from callers an
    ///     object does not authorize, malformed signals). By default, standard error.
    /// - Returns: The open connection.
    /// - Throws: ``DBusError`` when the bus cannot be reached or refuses the connection.
    public static func connect(
        to bus: Bus, executor: DBusExecutor = .shared,
        log: @escaping @Sendable (String) -> Void = DBusConnection.logToStandardError
    ) async throws -> DBusConnection {
        // Connecting and authenticating block: keep them off the cooperative pool.
        let (raw, uniqueName) = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<(OpaquePointer, String), any Error>) in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try openBlocking(bus) })
            }
        }
        let core = ConnectionCore(raw: raw, loop: executor.loop, log: log)
        // Before any job of the actor, which the loop runs after this one.
        executor.execute { core.start() }
        return DBusConnection(core: core, executor: executor, uniqueName: uniqueName)
    }

    /// A connection attached to no bus: every message it sends (calls, replies, signals) goes to
    /// `outbox`, with a serial of its own, and ``deliver(_:)`` hands it what a bus would. For
    /// fuzzing and testing exported objects in-process, without a bus daemon.
    ///
    /// - Parameters:
    ///   - raw: A libdbus connection the core owns from now on, closes and unreferences; nothing
    ///     is read from it or written to it (a private connection to a server that never accepts
    ///     it will do).
    ///   - uniqueName: The unique name the connection is to answer to.
    ///   - executor: The event loop to run on.
    ///   - log: Where the connection reports what it refused or dropped.
    ///   - outbox: Receives each outgoing message on the connection's loop; the message is
    ///     unreferenced after it returns (`dbus_message_ref` it to keep it).
    /// - Returns: The connection.
    package static func detached(
        raw: OpaquePointer, uniqueName: String, executor: DBusExecutor = .shared,
        log: @escaping @Sendable (String) -> Void = DBusConnection.logToStandardError,
        outbox: @escaping @Sendable (OpaquePointer) -> Void
    ) -> DBusConnection {
        let core = ConnectionCore(raw: raw, loop: executor.loop, log: log)
        core.outbox = outbox
        return DBusConnection(core: core, executor: executor, uniqueName: uniqueName)
    }

    /// Handles `message` (a method call, reply or signal) as if the bus had delivered it, on the
    /// connection's loop after what is queued there; for a connection made with
    /// ``detached(raw:uniqueName:executor:log:outbox:)``. Takes a reference of `message`.
    package nonisolated func deliver(_ message: OpaquePointer) {
        let delivery = Delivery(message: dbus_message_ref(message))
        let core = self.core
        core.loop.execute {
            core.deliver(delivery.message)
            dbus_message_unref(delivery.message)
        }
    }

    /// A message on its way to the loop, which alone touches it.
    private struct Delivery: @unchecked Sendable {
        let message: OpaquePointer
    }

    private static func openBlocking(_ bus: Bus) throws -> (OpaquePointer, String) {
        var error = DBusErrorBox()
        defer { error.free() }
        // The addresses are read at each connect (libdbus reads them once per process).
        let address: String?
        switch bus.kind {
        case .system:
            address =
                getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
                ?? "unix:path=/var/run/dbus/system_bus_socket"
        case .session:
            address = getenv("DBUS_SESSION_BUS_ADDRESS").map { String(cString: $0) }
        case .address(let given):
            address = given
        }
        let raw: OpaquePointer?
        if let address {
            raw = dbus_connection_open_private(address, &error.raw)
            if let raw, dbus_bus_register(raw, &error.raw) == 0 {
                dbus_connection_close(raw)
                dbus_connection_unref(raw)
                throw error.swiftError(default: "could not register with \(address)")
            }
        } else {
            raw = dbus_bus_get_private(DBUS_BUS_SESSION, &error.raw)
        }
        guard let raw else { throw error.swiftError(default: "could not connect to the \(bus)") }
        let uniqueName = dbus_bus_get_unique_name(raw).map { String(cString: $0) } ?? ""
        return (raw, uniqueName)
    }

    /// Writes a line to standard error, prefixed with `AbleDBus:`.
    public static let logToStandardError: @Sendable (String) -> Void = { line in
        var output = StandardError()
        print("AbleDBus: \(line)", to: &output)
    }

    /// Whether the connection is still open.
    public var isConnected: Bool { core.closedError == nil }

    /// Closes the connection; what is pending fails as described in the type's documentation.
    public func close() {
        core.close()
    }

    // MARK: - Method calls

    /// Calls a method and waits for its reply.
    ///
    /// - Parameters:
    ///   - destination: The bus name of the peer (`org.bluez`), or `nil` for a peer-to-peer connection.
    ///   - path: The object to call.
    ///   - interface: The method's interface.
    ///   - method: The method's name.
    ///   - arguments: The arguments to send.
    ///   - timeout: How long to wait for the reply, or `nil` to wait for as long as it takes.
    /// - Returns: The reply's values.
    /// - Throws: A ``DBusError`` carrying the peer's error name and message for an error reply;
    ///   one named ``DBusError/Name/noReply`` when `timeout` elapses; ``DBusError/Name/disconnected``
    ///   when the connection is lost; ``DBusError/Name/invalidArgs`` for arguments that cannot be sent;
    ///   ``DBusError/Name/accessDenied`` when the reply comes from another connection than the one
    ///   the call went to (its unique name, or the owner of a well-known name whose owner this
    ///   connection follows), which a bus that routes unrequested replies allows;
    ///   `CancellationError` at once when the calling task is cancelled (a late reply is dropped).
    public func call(
        destination: String?, path: DBusObjectPath, interface: String, method: String,
        arguments: [DBusValue] = [], timeout: Duration? = .seconds(25)
    ) async throws -> [DBusValue] {
        try await call(
            destination: destination, path: path, interface: interface, method: method, arguments: arguments,
            timeout: timeout, interruption: nil)
    }

    /// ``call(destination:path:interface:method:arguments:timeout:)`` that `interruption` can fail
    /// before its reply comes: it then throws the error given to
    /// ``DBusCallInterruption/interrupt(with:)``, and a late reply is dropped.
    package func call(
        destination: String?, path: DBusObjectPath, interface: String, method: String,
        arguments: [DBusValue] = [], timeout: Duration? = .seconds(25), interruption: DBusCallInterruption?
    ) async throws -> [DBusValue] {
        try Task.checkCancellation()
        if let closedError = core.closedError { throw closedError }
        guard
            let message = MessageHeaders.methodCall(
                destination: destination, path: path, interface: interface, method: method)
        else {
            throw DBusError(.noMemory, "could not create the call")
        }
        do {
            try MessageCoding.append(arguments, to: message)
        } catch {
            dbus_message_unref(message)
            throw error
        }
        let reply = PendingReply()
        let core = self.core
        defer { interruption?.disarm() }
        let milliseconds = timeout.map(Self.milliseconds) ?? ABLE_DBUS_TIMEOUT_INFINITE
        // A continuation awaited in an actor resumes its task on the global executor, which then
        // hops back to the actor: a worker thread woken and an `eventfd` write per call (perf
        // shows it). Preferring the loop as the task's executor makes the reply, dispatched on
        // the loop, resume this task right there, with no other thread involved.
        return try await withTaskExecutorPreference(executor) {
            try await withTaskCancellationHandler {
                // Naming `self` keeps this closure isolated to the connection (SE-0420), so the call
                // is sent from the loop without a hop.
                try await withUnsafeThrowingContinuation { continuation in
                    guard reply.install(continuation) else {
                        dbus_message_unref(message)
                        return
                    }
                    if let interruption,
                        let error = interruption.arm({ error in
                            if reply.resume(with: .failure(error)) { core.loop.execute { core.cancel(reply) } }
                        })
                    {
                        dbus_message_unref(message)
                        reply.resume(with: .failure(error))
                        return
                    }
                    self.core.send(message, to: destination, replyTo: reply, timeoutMilliseconds: milliseconds)
                }
            } onCancel: {
                if reply.resume(with: .failure(CancellationError())) {
                    core.loop.execute { core.cancel(reply) }
                }
            }
        }
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let total = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return Int32(clamping: max(total, 0))
    }

    /// Calls a method without asking for a reply; the call is sent and forgotten.
    ///
    /// - Throws: ``DBusError`` when the arguments cannot be sent or the connection is closed.
    public func send(
        destination: String?, path: DBusObjectPath, interface: String, method: String,
        arguments: [DBusValue] = []
    ) throws {
        if let closedError = core.closedError { throw closedError }
        guard
            let message = MessageHeaders.methodCall(
                destination: destination, path: path, interface: interface, method: method)
        else {
            throw DBusError(.noMemory, "could not create the call")
        }
        dbus_message_set_no_reply(message, 1)
        do {
            try MessageCoding.append(arguments, to: message)
        } catch {
            dbus_message_unref(message)
            throw error
        }
        core.sendWithoutReply(message)
    }

    // MARK: - Signals

    /// Subscribes to the signals a rule matches.
    ///
    /// The rule is installed in the bus daemon before this method returns, so no signal sent
    /// after it returns is missed. See ``DBusSignalStream`` for its buffering and lifetime.
    ///
    /// - Parameters:
    ///   - rule: Which signals to receive.
    ///   - bufferLimit: How many unconsumed signals the stream holds before dropping new ones.
    /// - Returns: The stream of matching signals.
    /// - Throws: ``DBusError`` when the daemon rejects the rule or the connection is closed.
    public func signals(matching rule: DBusMatchRule, bufferLimit: Int = 1024) async throws -> DBusSignalStream {
        let sink = SignalSink(bufferLimit: bufferLimit)
        let end = try await addSubscription(rule, receiver: sink)
        sink.buffer.onTermination(end)
        return DBusSignalStream(sink: sink, lifetime: IterationLifetime(sink.buffer))
    }

    /// Subscribes to the signals a rule matches, handing each one to `handler` on the
    /// connection's event loop as it is dispatched: no buffer, no task, no hop.
    ///
    /// This is the fast path for code that fans signals out itself (Able's notification streams
    /// use it). The handler must return quickly and never block. At a high rate of signals it
    /// costs a sixth to a quarter less CPU per signal than a loop over
    /// ``signals(matching:bufferLimit:)`` (`Scripts/bench dbus`, dbus-signal-propertieschanged),
    /// which pays for the buffer and for resuming the consuming task.
    ///
    /// - Parameters:
    ///   - rule: Which signals to receive.
    ///   - handler: Called with each matching signal, in bus order.
    ///   - onEnd: Called once when the subscription ends: with `nil` after ``DBusSignalSubscription/cancel()``,
    ///     with a ``DBusError`` when the connection is lost.
    /// - Returns: The subscription; it stays active until cancelled or the connection is lost.
    /// - Throws: ``DBusError`` when the daemon rejects the rule or the connection is closed.
    public func subscribe(
        matching rule: DBusMatchRule, handler: @escaping @Sendable (DBusSignal) -> Void,
        onEnd: @escaping @Sendable ((any Error)?) -> Void = { _ in }
    ) async throws -> DBusSignalSubscription {
        try await subscribe(rule, HandlerReceiver(handler: .decoded(handler), onEnd: onEnd))
    }

    /// Subscribes like ``subscribe(matching:handler:onEnd:)``, but the handler reads each signal
    /// in place, without its arguments decoded into ``DBusValue``s (the view is valid only
    /// during the call): the hot path of Able's notification streams.
    package func subscribe(
        matching rule: DBusMatchRule, readingInPlace handler: @escaping @Sendable (DBusSignalView) -> Void,
        onEnd: @escaping @Sendable ((any Error)?) -> Void = { _ in }
    ) async throws -> DBusSignalSubscription {
        try await subscribe(rule, HandlerReceiver(handler: .inPlace(handler), onEnd: onEnd))
    }

    /// What the connection holds for its users now: calls awaiting a reply or their turn (each
    /// with a waiting continuation), signal subscribers, and well-known names whose owner it follows. For tests
    /// that check that nothing leaks.
    package var resourceCounts: (pendingCalls: Int, subscribers: Int, trackedNames: Int) { core.resourceCounts }

    private func subscribe(_ rule: DBusMatchRule, _ receiver: HandlerReceiver) async throws -> DBusSignalSubscription {
        let end = try await addSubscription(rule, receiver: receiver)
        return DBusSignalSubscription {
            end()
            receiver.finish(throwing: nil)
        }
    }

    /// Registers a receiver and installs its rule; returns the function that ends it.
    private func addSubscription(
        _ rule: DBusMatchRule, receiver: any SignalReceiver
    ) async throws -> @Sendable () -> Void {
        if let closedError = core.closedError { throw closedError }
        let id = core.addSubscriber(rule, sink: receiver)
        let trackedName = rule.sender.flatMap { $0.hasPrefix(":") || $0 == Self.busName ? nil : $0 }
        do {
            if let trackedName, core.trackName(trackedName) {
                try await acquireMatch(Self.nameOwnerChangedRule(for: trackedName))
                core.setOwner(try? await nameOwner(of: trackedName), of: trackedName)
            }
            try await acquireMatch(rule.description)
        } catch {
            core.removeSubscriber(id)
            if let trackedName { stopTracking(trackedName) }
            receiver.finish(throwing: nil)
            throw error
        }
        return { [weak self] in
            guard let self else { return }
            Task { await self.endSubscription(id, rule: rule, trackedName: trackedName) }
        }
    }

    private func endSubscription(_ id: UInt64, rule: DBusMatchRule, trackedName: String?) {
        guard core.removeSubscriber(id) else { return }
        releaseMatch(rule.description)
        if let trackedName { stopTracking(trackedName) }
    }

    private func stopTracking(_ name: String) {
        if core.untrackName(name) { releaseMatch(Self.nameOwnerChangedRule(for: name)) }
    }

    private static let busName = "org.freedesktop.DBus"
    private static let busPath: DBusObjectPath = "/org/freedesktop/DBus"

    private static func nameOwnerChangedRule(for name: String) -> String {
        DBusMatchRule(sender: busName, interface: busName, member: "NameOwnerChanged", arguments: [0: name]).description
    }

    /// Takes a share of `rule` in the bus daemon, installing it (`AddMatch`) for its first user;
    /// returns once it is installed. Subscribers with one rule share one rule in the daemon, which
    /// keeps at most 512 per connection.
    private func acquireMatch(_ rule: String) async throws {
        if let use = core.matchRules[rule] {
            use.references += 1
            // An installation that failed took the rule out of the table: nothing to release.
            try await use.installation?.value
            return
        }
        let use = MatchRuleUse()
        core.matchRules[rule] = use
        // A task of its own, so that the cancellation of the first subscriber does not fail the
        // others that wait for the same rule.
        let installation = Task { try await self.install(rule, use) }
        use.installation = installation
        try await installation.value
    }

    private func install(_ rule: String, _ use: MatchRuleUse) async throws {
        do {
            _ = try await call(
                destination: Self.busName, path: Self.busPath, interface: Self.busName, method: "AddMatch",
                arguments: [.string(rule)])
        } catch {
            if core.matchRules[rule] === use { core.matchRules[rule] = nil }
            throw error
        }
    }

    /// Gives back a share of `rule`; the last one removes it from the bus daemon (`RemoveMatch`).
    private func releaseMatch(_ rule: String) {
        guard let use = core.matchRules[rule] else { return }
        use.references -= 1
        guard use.references == 0 else { return }
        core.matchRules[rule] = nil
        try? send(
            destination: Self.busName, path: Self.busPath, interface: Self.busName, method: "RemoveMatch",
            arguments: [.string(rule)])
    }

    /// How many match rules this connection has installed in the bus daemon, for tests that check
    /// that subscriptions share them.
    package var installedMatchRules: Int { core.matchRules.count }

    /// How many method calls may await replies from other connections at once; the next ones
    /// wait for their turn, in the order they were made. See the type's documentation.
    package var maximumOutstandingCalls: Int { core.maximumOutstandingCalls }

    /// Changes ``maximumOutstandingCalls`` (at least 1); a higher limit sends waiting calls at once.
    package func setMaximumOutstandingCalls(_ limit: Int) {
        core.setMaximumOutstandingCalls(limit)
    }

    /// How many method calls await replies from other connections, and how many wait for their turn.
    package var callCounts: (outstanding: Int, waiting: Int) { core.callCounts }

    /// Emits a signal from an object of this process.
    ///
    /// The signal's arguments are checked on the caller's thread and it is sent from the
    /// connection's event loop, in the order of calls; this method neither suspends nor waits.
    ///
    /// - Throws: ``DBusError`` when the arguments cannot be sent.
    public nonisolated func emitSignal(
        path: DBusObjectPath, interface: String, member: String, arguments: [DBusValue] = []
    ) throws {
        for argument in arguments { try MessageCoding.validate(argument) }
        let core = self.core
        core.loop.execute { core.emitSignal(path: path, interface: interface, member: member, arguments: arguments) }
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` for an exported object.
    ///
    /// Like ``emitSignal(path:interface:member:arguments:)``, this neither suspends nor waits.
    public nonisolated func emitPropertiesChanged(
        path: DBusObjectPath, interface: String, changed: [String: DBusValue], invalidated: [String] = []
    ) {
        let core = self.core
        core.loop.execute {
            core.emitPropertiesChanged(path: path, interface: interface, changed: changed, invalidated: invalidated)
        }
    }

    // MARK: - Exported objects

    /// Exports an object with the given interfaces.
    ///
    /// Calls to it run the interfaces' handlers; `Properties`, `Introspectable` and, below an
    /// object manager, `InterfacesAdded` come for free. Calls to paths that are not exported are
    /// answered with `UnknownObject`, unknown methods with `UnknownMethod`.
    ///
    /// - Parameters:
    ///   - interfaces: The object's interfaces.
    ///   - path: Where to export it.
    ///   - authorize: Decides from the caller's unique name whether it may call the object at
    ///     all; refused calls are answered with `AccessDenied`, logged, and change nothing.
    /// - Throws: ``DBusError`` (``DBusError/Name/invalidArgs``) when something is already exported at `path`.
    public func export(
        _ interfaces: [DBusInterface], at path: DBusObjectPath, authorize: (@Sendable (String) -> Bool)? = nil
    ) throws {
        let object = ExportTable.Object(
            interfaces: Dictionary(interfaces.map { ($0.name, $0) }, uniquingKeysWith: { $1 }), authorize: authorize,
            isObjectManager: false)
        guard core.exports.insert(object, at: path) else {
            throw DBusError(.invalidArgs, "an object is already exported at \(path)")
        }
        if let manager = core.exports.objectManager(above: path) {
            core.emitSignal(
                path: manager, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
                arguments: [.objectPath(path), ConnectionCore.interfacesAndProperties(interfaces)])
        }
    }

    /// Exports an `org.freedesktop.DBus.ObjectManager` at `path` for every object exported below it.
    ///
    /// - Throws: ``DBusError`` when something is already exported at `path`.
    public func exportObjectManager(at path: DBusObjectPath, authorize: (@Sendable (String) -> Bool)? = nil) throws {
        let object = ExportTable.Object(interfaces: [:], authorize: authorize, isObjectManager: true)
        guard core.exports.insert(object, at: path) else {
            throw DBusError(.invalidArgs, "an object is already exported at \(path)")
        }
    }

    /// Stops exporting the object at `path`; below an object manager this emits `InterfacesRemoved`.
    ///
    /// - Returns: Whether an object was exported there.
    @discardableResult
    public func unexport(_ path: DBusObjectPath) -> Bool {
        guard let object = core.exports.remove(path) else { return false }
        if !object.isObjectManager, let manager = core.exports.objectManager(above: path) {
            core.emitSignal(
                path: manager, interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved",
                arguments: [.objectPath(path), .array(.string, object.interfaces.keys.sorted().map(DBusValue.string))])
        }
        return true
    }

    // MARK: - Bus names

    /// What `RequestName` answered.
    public enum NameRequestResult: UInt32, Sendable {
        /// The caller owns the name now (`DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER`).
        case primaryOwner = 1
        /// Another connection owns it; the caller is queued for it.
        case inQueue = 2
        /// Another connection owns it and the caller asked not to queue.
        case exists = 3
        /// The caller owned the name already.
        case alreadyOwner = 4
    }

    /// Flags of `RequestName`.
    public struct NameRequestFlags: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Let a later `RequestName` with ``replaceExisting`` take the name (`DBUS_NAME_FLAG_ALLOW_REPLACEMENT`).
        public static let allowReplacement = NameRequestFlags(rawValue: 0x1)
        /// Take the name from an owner that allows replacement (`DBUS_NAME_FLAG_REPLACE_EXISTING`).
        public static let replaceExisting = NameRequestFlags(rawValue: 0x2)
        /// Fail rather than queue when the name is taken (`DBUS_NAME_FLAG_DO_NOT_QUEUE`).
        public static let doNotQueue = NameRequestFlags(rawValue: 0x4)
    }

    /// Asks the bus for a well-known name.
    ///
    /// The corresponding bus method is `org.freedesktop.DBus.RequestName`.
    /// - Throws: ``DBusError`` when the bus refuses (for example by policy).
    @discardableResult
    public func requestName(_ name: String, flags: NameRequestFlags = [.doNotQueue]) async throws -> NameRequestResult {
        let reply = try await callBus("RequestName", [.string(name), .uint32(flags.rawValue)])
        let code = try reply.first.unwrap("RequestName reply").decode(UInt32.self)
        guard let result = NameRequestResult(rawValue: code) else {
            throw DBusError(.invalidArgs, "RequestName answered the unknown code \(code)")
        }
        return result
    }

    /// Gives a well-known name back to the bus.
    ///
    /// The corresponding bus method is `org.freedesktop.DBus.ReleaseName`.
    public func releaseName(_ name: String) async throws {
        _ = try await callBus("ReleaseName", [.string(name)])
    }

    /// The unique name that owns `name` now, or `nil` when nobody does.
    public func nameOwner(of name: String) async throws -> String? {
        do {
            return try await callBus("GetNameOwner", [.string(name)]).first.unwrap("GetNameOwner reply").decode()
        } catch let error as DBusError where error.name == .nameHasNoOwner {
            return nil
        }
    }

    /// A change of a name's owner.
    public struct NameOwnerChange: Sendable, Equatable {
        /// The name.
        public var name: String
        /// The owner before, or `nil`.
        public var oldOwner: String?
        /// The owner now, or `nil` when the name was released (for example its process exited).
        public var newOwner: String?
    }

    /// Watches the owner of one name, for example to notice `bluetoothd` restarting.
    ///
    /// The corresponding bus signal is `org.freedesktop.DBus.NameOwnerChanged`.
    /// - Returns: A stream of changes, with the buffering and lifetime of ``DBusSignalStream``.
    public func nameOwnerChanges(of name: String) async throws -> NameOwnerChangeStream {
        let rule = DBusMatchRule(
            sender: Self.busName, interface: Self.busName, member: "NameOwnerChanged", arguments: [0: name])
        return NameOwnerChangeStream(signals: try await signals(matching: rule))
    }

    private func callBus(_ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await call(
            destination: Self.busName, path: Self.busPath, interface: Self.busName, method: method, arguments: arguments
        )
    }
}

extension Optional where Wrapped == DBusValue {
    func unwrap(_ what: String) throws(DBusError) -> DBusValue {
        guard let self else { throw DBusError(.invalidArgs, "\(what) has no value") }
        return self
    }
}
