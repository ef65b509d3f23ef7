import CDBus

/// New messages, with their header strings passed to libdbus through `withCString`.
///
/// A Swift string passed straight to a C `const char *` parameter is copied to the heap when it
/// is small (15 UTF-8 bytes or fewer, as most bus names, interfaces and members are): that was
/// four allocations for every method call. `withCString` lends a small string's bytes from the
/// stack, and a large one's own storage, without allocating.
enum MessageHeaders {
    static func methodCall(
        destination: String?, path: DBusObjectPath, interface: String, method: String
    ) -> OpaquePointer? {
        withOptionalCString(destination) { destination in
            path.rawValue.withCString { path in
                interface.withCString { interface in
                    method.withCString { dbus_message_new_method_call(destination, path, interface, $0) }
                }
            }
        }
    }

    static func signal(path: DBusObjectPath, interface: String, member: String) -> OpaquePointer? {
        path.rawValue.withCString { path in
            interface.withCString { interface in
                member.withCString { dbus_message_new_signal(path, interface, $0) }
            }
        }
    }

    /// The error reply to `call`.
    static func error(replyingTo call: OpaquePointer, _ error: DBusError) -> OpaquePointer? {
        error.name.rawValue.withCString { name in
            error.message.withCString { dbus_message_new_error(call, name, $0) }
        }
    }

    private static func withOptionalCString<Result>(
        _ string: String?, _ body: (UnsafePointer<CChar>?) -> Result
    ) -> Result {
        guard let string else { return body(nil) }
        return string.withCString(body)
    }
}
