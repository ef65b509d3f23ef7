import Able
import AbleDBus
import Testing

@testable import AbleBlueZ

struct BusErrorTests {
    @Test(
        "The bus's own errors map to the codes that describe them",
        arguments: [
            ("org.freedesktop.DBus.Error.ServiceUnknown", BluetoothError.Code.daemonUnavailable),
            ("org.freedesktop.DBus.Error.NameHasNoOwner", .daemonUnavailable),
            // What the soak met while bluetoothd was stopped: the bus tried to start it by activation.
            ("org.freedesktop.DBus.Error.Spawn.ChildExited", .daemonUnavailable),
            ("org.freedesktop.DBus.Error.Spawn.ServiceNotFound", .daemonUnavailable),
            ("org.freedesktop.DBus.Error.Spawn.ExecFailed", .daemonUnavailable),
            ("org.freedesktop.DBus.Error.NoReply", .timeout),
            ("org.freedesktop.DBus.Error.UnknownObject", .doesNotExist),
            ("org.freedesktop.DBus.Error.Failed", .failed),
        ])
    func busErrors(name: String, code: BluetoothError.Code) {
        let error = BluetoothError(dbusError: DBusError(DBusError.Name(rawValue: name), "a message"))
        #expect(error.code == code)
        #expect(error.message == "a message")
    }

    /// dbus-daemon's answer to a call whose recipient left the bus before replying.
    @Test func noReplyFromARecipientThatLeftTheBusIsDaemonUnavailable() {
        let error = BluetoothError(
            dbusError: DBusError(.noReply, "Message recipient disconnected from message bus without replying"))
        #expect(error.code == .daemonUnavailable)
        #expect(ReconnectPolicy.isTransient(error))
    }

    /// dbus-daemon's answer beyond a connection's limits (`bus/connection.c`).
    @Test func theBusRefusingBeyondItsLimitsIsNotAvailableAndRetried() {
        let error = BluetoothError(
            dbusError: DBusError(
                .limitsExceeded, "The maximum number of pending replies per connection has been reached"))
        #expect(error.code == .notAvailable)
        #expect(error.errorName == "org.freedesktop.DBus.Error.LimitsExceeded")
        #expect(error.message.contains("The maximum number of pending replies per connection has been reached"))
        #expect(ReconnectPolicy.isTransient(error))
    }

    @Test func aMaintainedConnectionRetriesWhileTheBusCannotStartBluetoothd() {
        let error = BluetoothError(
            dbusError: DBusError(
                "org.freedesktop.DBus.Error.Spawn.ChildExited", "Launch helper exited with unknown return code 1"))
        #expect(ReconnectPolicy.isTransient(error))
    }
}
