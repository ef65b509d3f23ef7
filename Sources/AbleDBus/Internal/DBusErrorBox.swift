import CDBus

struct DBusErrorBox {
    var raw = CDBus.DBusError()

    init() {
        dbus_error_init(&raw)
    }

    mutating func free() {
        dbus_error_free(&raw)
    }

    func swiftError(default message: String) -> AbleDBus.DBusError {
        guard raw.name != nil else { return AbleDBus.DBusError(.failed, message) }
        return AbleDBus.DBusError(
            AbleDBus.DBusError.Name(rawValue: String(cString: raw.name)),
            raw.message.map { String(cString: $0) } ?? message)
    }
}
