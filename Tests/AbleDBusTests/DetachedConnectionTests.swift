import AbleTestSupport
import CDBus
import Testing

@testable import AbleDBus

/// A connection attached to no bus (`DBusConnection.detached`), as the exports fuzzer drives it:
/// what it sends goes to its outbox, and `deliver(_:)` hands it what a bus would.
@Suite(.timeLimit(.minutes(1)))
struct DetachedConnectionTests {
    /// What the outbox received of one message.
    struct Sent: Sendable, Equatable {
        var type: Int32
        var replySerial: UInt32
        var member: String?
        var arguments: [DBusValue]
    }

    /// A detached connection, and what its outbox received; `answer` may reply to its calls.
    static func connection(
        answer: (@Sendable (OpaquePointer) -> OpaquePointer?)? = nil
    ) throws -> (DBusConnection, Locked<[Sent]>) {
        var error = DBusErrorBox()
        defer { error.free() }
        let server = try #require(dbus_server_listen("unix:tmpdir=/tmp", &error.raw))
        defer {
            dbus_server_disconnect(server)
            dbus_server_unref(server)
        }
        let address = try #require(dbus_server_get_address(server))
        defer { dbus_free(address) }
        let raw = try #require(dbus_connection_open_private(address, &error.raw))
        let sent = Locked<[Sent]>([])
        // Weak: the connection keeps its outbox, so a strong reference from the outbox back to the
        // connection would keep both alive for good (AddressSanitizer's leak check saw it).
        let connection = WeakConnection()
        let detached = DBusConnection.detached(
            raw: raw, uniqueName: ":1.42", log: { _ in },
            outbox: { message in
                sent.value.append(
                    Sent(
                        type: dbus_message_get_type(message), replySerial: dbus_message_get_reply_serial(message),
                        member: dbus_message_get_member(message).map { String(cString: $0) },
                        arguments: (try? MessageCoding.decodeArguments(of: message)) ?? []))
                if let reply = answer?(message) {
                    connection.value?.deliver(reply)
                    dbus_message_unref(reply)
                }
            })
        connection.value = detached
        return (detached, sent)
    }

    /// The connection its own outbox answers through, held weakly; set before any message is sent.
    final class WeakConnection: @unchecked Sendable {
        weak var value: DBusConnection?
    }

    @Test func aDeliveredCallIsAnsweredOnceThroughTheOutbox() async throws {
        let (connection, sent) = try Self.connection()
        try await connection.export(
            [
                DBusInterface(
                    "org.example.Echo",
                    methods: [.immediate("Echo", in: "s", out: "s") { call in [call.arguments[0]] }])
            ], at: "/echo")
        for (serial, sender) in [(7, ":1.7"), (8, ":1.8")] {
            let call = try #require(dbus_message_new_method_call(":1.42", "/echo", "org.example.Echo", "Echo"))
            dbus_message_set_serial(call, UInt32(serial))
            dbus_message_set_sender(call, sender)
            try MessageCoding.append([.string("hi \(serial)")], to: call)
            connection.deliver(call)
            dbus_message_unref(call)
        }
        try await waitUntil { sent.value.count == 2 }
        #expect(
            sent.value == [
                Sent(
                    type: ABLE_DBUS_MESSAGE_TYPE_METHOD_RETURN, replySerial: 7, member: nil,
                    arguments: [.string("hi 7")]),
                Sent(
                    type: ABLE_DBUS_MESSAGE_TYPE_METHOD_RETURN, replySerial: 8, member: nil,
                    arguments: [.string("hi 8")]),
            ])
        await connection.close()
    }

    @Test func aCallTheConnectionSendsIsAnsweredByADeliveredReply() async throws {
        let (connection, sent) = try Self.connection { call in
            guard let reply = dbus_message_new_method_return(call) else { return nil }
            dbus_message_set_sender(reply, ":1.7")
            try? MessageCoding.append([.uint32(dbus_message_get_serial(call))], to: reply)
            return reply
        }
        let first = try await connection.call(
            destination: ":1.7", path: "/", interface: "org.example.Counter", method: "Next")
        let second = try await connection.call(
            destination: ":1.7", path: "/", interface: "org.example.Counter", method: "Next")
        // Each call has a serial of its own, which its reply names.
        #expect(first == [.uint32(1)])
        #expect(second == [.uint32(2)])
        #expect(sent.value.map(\.member) == ["Next", "Next"])
        #expect(await connection.resourceCounts.pendingCalls == 0)
        await connection.close()
    }
}
