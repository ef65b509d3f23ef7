import AbleIO
import CDBus
import Synchronization

extension ConnectionCore {
    private static let propertiesInterface = "org.freedesktop.DBus.Properties"
    private static let introspectableInterface = "org.freedesktop.DBus.Introspectable"
    private static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
    private static let peerInterface = "org.freedesktop.DBus.Peer"

    /// Answers a method call addressed to this connection.
    func handleMethodCall(_ message: OpaquePointer) {
        let sender = dbus_message_get_sender(message).map { headerStrings.string($0) } ?? ""
        let pathText = dbus_message_get_path(message).map { headerStrings.string($0) } ?? "/"
        let interface = dbus_message_get_interface(message).map { headerStrings.string($0) } ?? ""
        let member = dbus_message_get_member(message).map { headerStrings.string($0) } ?? ""
        let path = DBusObjectPath(unchecked: pathText)
        let replier = Replier(core: self, message: message)

        if interface == Self.peerInterface {
            answerPeer(member, replier: replier)
            return
        }
        guard let object = exports[path] else {
            if interface.isEmpty || interface == Self.introspectableInterface, member == "Introspect" {
                let children = exports.childNodes(of: path)
                if !children.isEmpty || path == .root {
                    replier.reply([.string(Introspection.xml(for: nil, children: children))])
                    return
                }
            }
            replier.fail(DBusError(.unknownObject, "no object at \(pathText)"))
            return
        }
        if let authorize = object.authorize, !authorize(sender) {
            log("refused \(interface).\(member) on \(pathText) from \(sender): not an authorized caller")
            replier.fail(DBusError(.accessDenied, "\(sender) may not call \(pathText)"))
            return
        }
        let signature = dbus_message_get_signature(message).map { headerStrings.string($0) } ?? ""
        /// The call with its arguments decoded; `nil` (and the call answered) when they cannot be.
        func decoded() -> DBusMethodCall? {
            do {
                let arguments = try MessageCoding.decodeArguments(of: message, strings: &bodyStrings)
                return DBusMethodCall(
                    sender: sender, path: path, interface: interface, member: member, arguments: arguments)
            } catch {
                replier.fail(error)
                return nil
            }
        }

        switch interface {
        case Self.propertiesInterface:
            guard let call = decoded() else { return }
            handleProperties(call, signature: signature, object: object, replier: replier)
        case Self.introspectableInterface where member == "Introspect":
            replier.reply([.string(Introspection.xml(for: object, children: exports.childNodes(of: path)))])
        case Self.objectManagerInterface where object.isObjectManager && member == "GetManagedObjects":
            replier.reply([managedObjects(below: path)])
        default:
            let found: DBusMethod?
            if interface.isEmpty, !object.interfaces.isEmpty {
                found = object.interfaces.values.lazy.flatMap(\.methods).first { $0.name == member }
            } else if let named = object.interfaces[interface] {
                found = named.methods.first { $0.name == member }
            } else {
                replier.fail(DBusError(.unknownInterface, "\(pathText) has no interface \(interface)"))
                return
            }
            guard let method = found else {
                replier.fail(DBusError(.unknownMethod, "\(interface).\(member) does not exist at \(pathText)"))
                return
            }
            guard method.inputSignature.rawValue == signature else {
                replier.fail(
                    DBusError(.invalidArgs, "\(member) takes (\(method.inputSignature)), not (\(signature))"))
                return
            }
            if let inPlace = method.inPlaceHandler {
                let view = DBusMethodCallView(
                    message: message, sender: sender, path: path, interface: interface, member: member)
                replier.complete(Result { try inPlace(view) }, outputSignature: method.outputSignature)
                return
            }
            guard let call = decoded() else { return }
            run(method, call: call, replier: replier)
        }
    }

    /// Answers `org.freedesktop.DBus.Peer` on any path, as every D-Bus connection does (libdbus
    /// answers it for connections that dispatch through it; this one dispatches itself).
    private func answerPeer(_ member: String, replier: Replier) {
        switch member {
        case "Ping":
            replier.reply([])
        case "GetMachineId":
            var error = DBusErrorBox()
            defer { error.free() }
            guard let id = dbus_try_get_local_machine_id(&error.raw) else {
                replier.fail(error.swiftError(default: "this machine has no D-Bus machine ID"))
                return
            }
            defer { dbus_free(id) }
            replier.reply([.string(String(cString: id))])
        default:
            replier.fail(DBusError(.unknownMethod, "\(Self.peerInterface).\(member) does not exist"))
        }
    }

    private func run(_ method: DBusMethod, call: DBusMethodCall, replier: Replier) {
        let outputSignature = method.outputSignature
        switch method.handler {
        case .immediate(let handler):
            replier.complete(Result { try handler(call) }, outputSignature: outputSignature)
        case .async(let handler):
            var call = call
            call.earlyAnswer = DBusEarlyAnswer(replier: replier, loop: loop)
            // The handler starts here, on the connection's loop, and runs on until it first
            // suspends; one that answers without suspending is answered at once, with no task
            // scheduled on another thread and no hop back.
            let task = Task.immediate { [self, call] in
                let result = await Result { try await handler(call) }
                // An early answer may have answered the call already: then the result is dropped.
                guard replier.claimAnswer() else { return }
                if isOnLoop {
                    replier.complete(result, outputSignature: outputSignature)
                } else {
                    loop.execute { replier.complete(result, outputSignature: outputSignature) }
                }
            }
            replier.handlerStarted(task)
        }
    }

    private func handleProperties(
        _ call: DBusMethodCall, signature: String, object: ExportTable.Object, replier: Replier
    ) {
        func interface(_ index: Int) -> DBusInterface? {
            guard case .string(let name) = call.arguments[index] else { return nil }
            return object.interfaces[name]
        }
        switch (call.member, signature) {
        case ("Get", "ss"):
            guard let found = interface(0) else {
                return replier.fail(DBusError(.unknownInterface, "no interface \(call.arguments[0])"))
            }
            guard case .string(let name) = call.arguments[1],
                let property = found.properties.first(where: { $0.name == name })
            else { return replier.fail(DBusError(.unknownProperty, "no property \(call.arguments[1])")) }
            replier.complete(Result { [DBusValue.variant(try property.get())] }, outputSignature: "v")
        case ("GetAll", "s"):
            guard let found = interface(0) else {
                // The specification allows an empty answer for an interface the object lacks.
                return replier.reply([.dictionary(key: .string, value: .variant, [])])
            }
            replier.reply([found.propertyValues()])
        case ("Set", "ssv"):
            guard let found = interface(0) else {
                return replier.fail(DBusError(.unknownInterface, "no interface \(call.arguments[0])"))
            }
            guard case .string(let name) = call.arguments[1],
                let property = found.properties.first(where: { $0.name == name })
            else { return replier.fail(DBusError(.unknownProperty, "no property \(call.arguments[1])")) }
            guard let setter = property.set else {
                return replier.fail(DBusError(.propertyReadOnly, "\(name) is read-only"))
            }
            let value = call.arguments[2].unwrappingVariant
            guard value.signature == property.signature else {
                return replier.fail(DBusError(.invalidArgs, "\(name) is \(property.signature), not \(value.signature)"))
            }
            do {
                try setter(call.sender, value)
            } catch {
                return replier.complete(.failure(error), outputSignature: "")
            }
            replier.reply([])
            if property.emitsChangedSignal, let newValue = try? property.get() {
                emitPropertiesChanged(
                    path: call.path, interface: found.name, changed: [name: newValue], invalidated: [])
            }
        default:
            replier.fail(DBusError(.unknownMethod, "Properties.\(call.member)(\(signature)) does not exist"))
        }
    }

    func managedObjects(below root: DBusObjectPath) -> DBusValue {
        let entries = exports.objects(below: root).map { path, object in
            DBusDictionaryEntry(key: .objectPath(path), value: Self.interfacesAndProperties(object.interfaces.values))
        }
        return .dictionary(key: .objectPath, value: "a{sa{sv}}", entries)
    }

    static func interfacesAndProperties(_ interfaces: some Sequence<DBusInterface>) -> DBusValue {
        .dictionary(
            key: .string, value: "a{sv}",
            interfaces.sorted { $0.name < $1.name }.map {
                DBusDictionaryEntry(key: .string($0.name), value: $0.propertyValues())
            })
    }

    func emitPropertiesChanged(
        path: DBusObjectPath, interface: String, changed: [String: DBusValue], invalidated: [String]
    ) {
        let changedEntries = changed.sorted { $0.key < $1.key }.map {
            DBusDictionaryEntry(key: .string($0.key), value: .variant($0.value))
        }
        emitSignal(
            path: path, interface: Self.propertiesInterface, member: "PropertiesChanged",
            arguments: [
                .string(interface), .dictionary(key: .string, value: .variant, changedEntries),
                .array(.string, invalidated.map(DBusValue.string)),
            ])
    }

    func emitSignal(path: DBusObjectPath, interface: String, member: String, arguments: [DBusValue]) {
        guard let message = MessageHeaders.signal(path: path, interface: interface, member: member) else { return }
        do {
            try MessageCoding.append(arguments, to: message)
        } catch {
            log("could not emit \(interface).\(member): \(error)")
            dbus_message_unref(message)
            return
        }
        sendWithoutReply(message)
    }
}

/// Sends the one reply a method call gets, unless the caller asked for none.
///
/// An asynchronous handler's call can be answered twice over: by the handler's result and by an
/// early answer (``DBusEarlyAnswer``), from any threads. An atomic state decides which answer is
/// sent, rather than a `Lock`: a `Lock` is a second allocation per call, and every method call
/// makes a `Replier`.
final class Replier: @unchecked Sendable {
    // Touched only on the connection's event loop.
    private let core: ConnectionCore
    private let message: OpaquePointer
    /// Where an asynchronous handler's call stands; any thread.
    private let state = Atomic<HandlerState>(.running)
    /// The handler's task once it has suspended or returned: written once, before `state` leaves
    /// `running` for `runningWithTask`, and read only by whoever moves `state` on from
    /// `runningWithTask` (the atomic's ordering makes the write visible to that reader).
    nonisolated(unsafe) private var task: Task<Void, Never>?

    private enum HandlerState: UInt8, AtomicRepresentable {
        /// Not answered; the handler has not suspended or returned yet.
        case running
        /// Not answered; ``task`` holds the handler's task.
        case runningWithTask
        /// The handler's result answered the call.
        case answered
        /// ``answerEarly(_:loop:)`` answered it: the handler's task is cancelled.
        case answeredEarly
    }

    init(core: ConnectionCore, message: OpaquePointer) {
        self.core = core
        self.message = dbus_message_ref(message)
    }

    deinit {
        dbus_message_unref(message)
    }

    func reply(_ values: [DBusValue]) {
        guard dbus_message_get_no_reply(message) == 0, let reply = dbus_message_new_method_return(message) else {
            return
        }
        do {
            try MessageCoding.append(values, to: reply)
        } catch {
            dbus_message_unref(reply)
            fail(DBusError(.failed, "the handler's reply could not be encoded: \(error.message)"))
            return
        }
        core.sendWithoutReply(reply)
    }

    func fail(_ error: DBusError) {
        guard dbus_message_get_no_reply(message) == 0,
            let reply = MessageHeaders.error(replyingTo: message, error)
        else { return }
        core.sendWithoutReply(reply)
    }

    /// Records the task of the call's asynchronous handler, once it has suspended or returned; an
    /// early answer that came first cancels it.
    func handlerStarted(_ task: Task<Void, Never>) {
        self.task = task
        let (exchanged, found) = state.compareExchange(
            expected: .running, desired: .runningWithTask, ordering: .acquiringAndReleasing)
        if !exchanged, found == .answeredEarly { task.cancel() }
    }

    /// Claims the right to answer an asynchronous handler's call with its result: `false` when an
    /// early answer has answered it. Any thread.
    func claimAnswer() -> Bool {
        answer(as: .answered) != nil
    }

    /// Answers the call with `error` unless it has been answered, and cancels its handler. Any
    /// thread; the answer is sent on the loop.
    func answerEarly(_ error: DBusError, loop: EventLoop) {
        guard let left = answer(as: .answeredEarly) else { return }
        // Left `running`: the handler has not suspended yet, and handlerStarted(_:) cancels it.
        if left == .runningWithTask { task?.cancel() }
        if loop.isOnLoop {
            fail(error)
        } else {
            loop.execute { self.fail(error) }
        }
    }

    /// Moves the state from either running state to `answered`, the one answer a call gets;
    /// returns the running state it left, or `nil` when the call was answered already.
    private func answer(as answered: HandlerState) -> HandlerState? {
        var current = state.load(ordering: .acquiring)
        while current == .running || current == .runningWithTask {
            let (exchanged, found) = state.compareExchange(
                expected: current, desired: answered, ordering: .acquiringAndReleasing)
            if exchanged { return current }
            current = found
        }
        return nil
    }

    func complete(_ result: Result<[DBusValue], any Error>, outputSignature: DBusSignature) {
        switch result {
        case .success(let values):
            func joinedSignature() -> String { values.map(\.signature.rawValue).joined() }
            // One value, the usual reply, is checked without building the joined signature.
            let matches =
                values.count == 1
                ? values[0].signature == outputSignature : joinedSignature() == outputSignature.rawValue
            guard matches else {
                let signature = joinedSignature()
                core.log("a handler returned (\(signature)) where (\(outputSignature)) was declared")
                fail(DBusError(.failed, "the handler returned (\(signature)), not (\(outputSignature))"))
                return
            }
            reply(values)
        case .failure(let error as DBusError):
            fail(error)
        case .failure(let error):
            fail(DBusError(.failed, String(describing: error)))
        }
    }
}

/// A way to answer a method call before its asynchronous handler returns, for a server that must
/// answer at once when the reason for the call goes away: Able's GATT server answers a central's
/// requests before it disconnects the central, whatever their handlers are doing.
///
/// ``fail(_:)`` sends the error reply (on the connection's loop) and cancels the handler's task;
/// what the handler returns or throws afterwards is dropped. Only the first answer of a call is
/// sent: after the handler has returned, ``fail(_:)`` does nothing.
package struct DBusEarlyAnswer: Sendable {
    fileprivate let replier: Replier
    fileprivate let loop: EventLoop

    /// Answers the call with `error` now, unless it has been answered, and cancels its handler.
    package func fail(_ error: DBusError) {
        replier.answerEarly(error, loop: loop)
    }
}
