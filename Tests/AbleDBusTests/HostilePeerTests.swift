import AbleDBus
import AbleTestSupport
import CDBus
import Foundation
import Testing

/// Peers that misbehave on purpose: forged replies from a connection the call did not go to, a
/// handler that hands out a descriptor that is closed or already taken. Each ends in a typed
/// error, no call is left waiting, and the connections keep working.
@Suite(.timeLimit(.minutes(1)))
struct HostilePeerTests {
    static let path: DBusObjectPath = "/hostile"

    /// A server whose `Hang` never answers (until the test ends) and whose `Descriptor` hands out
    /// what `descriptor` gives.
    func export(on server: DBusConnection, descriptor: @escaping @Sendable () -> DBusFileDescriptor) async throws {
        try await server.export(
            [
                DBusInterface(
                    "org.example.Hostile",
                    methods: [
                        DBusMethod("Hang") { _ in
                            try await Task.sleep(for: .seconds(30))
                            return []
                        },
                        DBusMethod.immediate("Descriptor", out: "h") { _ in [.unixFD(descriptor())] },
                        DBusMethod.immediate("Ping", out: "s") { _ in [.string("pong")] },
                    ])
            ], at: Self.path)
    }

    /// Calls `method`. The timeout bounds a failure, not speed: the suite's buses start together
    /// with every other D-Bus suite's, and on a loaded 2-core machine an answer has taken over 2 s.
    func call(_ method: String, from client: DBusConnection, to server: DBusConnection) async throws -> [DBusValue] {
        try await client.call(
            destination: server.uniqueName, path: Self.path, interface: "org.example.Hostile", method: method,
            timeout: .seconds(20))
    }

    @Test func repliesForgedByAnotherConnectionDoNotAnswerACall() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await export(on: server) { DBusFileDescriptor(owning: -1) }
            let pending = Task { try await call("Hang", from: client, to: server) }
            try await waitUntil { await client.resourceCounts.pendingCalls == 1 }

            // A third connection sends method returns for every serial the client may have used,
            // which this bus (like any whose policy allows unrequested replies) routes to it.
            try await Self.forgeReplies(on: bus.address, to: client.uniqueName, serials: 1...64)

            // The call ends with a typed refusal, not with the forged answer.
            let error = await #expect(throws: DBusError.self) { try await pending.value }
            #expect(error?.name == .accessDenied, "\(String(describing: error))")
            #expect(await client.resourceCounts.pendingCalls == 0)
            #expect(try await call("Ping", from: client, to: server) == [.string("pong")])
        }
    }

    @Test func anInterruptedCallFailsWithTheInterruptionsErrorAndIsNotLeftWaiting() async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await export(on: server) { DBusFileDescriptor(owning: -1) }
            func call(_ method: String, _ interruption: DBusCallInterruption) async throws -> [DBusValue] {
                try await client.call(
                    destination: server.uniqueName, path: Self.path, interface: "org.example.Hostile", method: method,
                    timeout: .seconds(25), interruption: interruption)
            }
            let interruption = DBusCallInterruption()
            let pending = Task { try await call("Hang", interruption) }
            try await waitUntil { await client.resourceCounts.pendingCalls == 1 }
            interruption.interrupt(with: DBusError(.failed, "the link went down"))
            let error = await #expect(throws: DBusError.self) { try await pending.value }
            #expect(error?.message == "the link went down", "\(String(describing: error))")
            try await waitUntil { await client.resourceCounts.pendingCalls == 0 }

            // Interrupted before it starts: it fails without being sent.
            let early = DBusCallInterruption()
            early.interrupt(with: DBusError(.failed, "too late to start"))
            let refused = await #expect(throws: DBusError.self) { try await call("Ping", early) }
            #expect(refused?.message == "too late to start")

            // Interrupted after its reply: nothing changes.
            let late = DBusCallInterruption()
            #expect(try await call("Ping", late) == [.string("pong")])
            late.interrupt(with: DBusError(.failed, "after the reply"))
            #expect(try await self.call("Ping", from: client, to: server) == [.string("pong")])
        }
    }

    static let methodReturn: Int32 = 2  // DBUS_MESSAGE_TYPE_METHOD_RETURN

    /// Sends method returns for `serials` to `destination` from a connection of its own, on a
    /// thread of its own (libdbus blocks there), and returns once `destination` has seen them all.
    static func forgeReplies(on address: String, to destination: String, serials: ClosedRange<UInt32>) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            Thread {
                guard let forger = dbus_connection_open_private(address, nil) else {
                    continuation.resume(throwing: DBusError(.failed, "cannot connect the forger"))
                    return
                }
                defer {
                    dbus_connection_close(forger)
                    dbus_connection_unref(forger)
                }
                guard dbus_bus_register(forger, nil) != 0 else {
                    continuation.resume(throwing: DBusError(.failed, "cannot register the forger"))
                    return
                }
                for serial in serials {
                    guard let reply = dbus_message_new(methodReturn) else { continue }
                    dbus_message_set_destination(reply, destination)
                    dbus_message_set_reply_serial(reply, serial)
                    dbus_connection_send(forger, reply, nil)
                    dbus_message_unref(reply)
                }
                dbus_connection_flush(forger)
                // A round trip to the destination after the forgeries. It dispatches its messages
                // in order, so once it has answered it has seen every forged reply, and none can
                // still arrive for a call the test makes later with one of those serials.
                guard let ping = dbus_message_new_method_call(destination, "/", "org.freedesktop.DBus.Peer", "Ping")
                else {
                    continuation.resume(throwing: DBusError(.noMemory, "cannot make the forger's ping"))
                    return
                }
                defer { dbus_message_unref(ping) }
                guard let answer = dbus_connection_send_with_reply_and_block(forger, ping, 20_000, nil) else {
                    continuation.resume(throwing: DBusError(.failed, "no answer to the forger's ping"))
                    return
                }
                dbus_message_unref(answer)
                continuation.resume()
            }.start()
        }
    }

    @Test(arguments: [false, true])
    func aHandlerThatHandsOutADeadDescriptorAnswersWithAnError(taken: Bool) async throws {
        try await withPrivateBus { bus, server in
            let client = try await bus.connect()
            try await export(on: server) {
                guard taken else {
                    // A number that is no open descriptor, as one closed behind the object's back
                    // would be. Not a real descriptor closed here: the object still owns its number
                    // and closes it when it goes, and in a process whose other threads open
                    // descriptors all the time that number is soon someone else's (a socket of a
                    // connection saying Hello, whose libdbus then polls a closed descriptor forever
                    // while holding the lock every other connection needs to register). No
                    // descriptor can have this number: it is above any limit on open files.
                    return DBusFileDescriptor(owning: Int32.max)
                }
                var fds: [Int32] = [-1, -1]
                _ = pipe(&fds)
                close(fds[1])
                let descriptor = DBusFileDescriptor(owning: fds[0])
                // Taken by someone else, who closed it.
                close(descriptor.take()!)
                return descriptor
            }
            let error = await #expect(throws: DBusError.self) { try await call("Descriptor", from: client, to: server) }
            #expect(error?.name == .failed, "\(String(describing: error))")
            #expect(await client.resourceCounts.pendingCalls == 0)
            // Both connections keep working.
            #expect(try await call("Ping", from: client, to: server) == [.string("pong")])
        }
    }
}
