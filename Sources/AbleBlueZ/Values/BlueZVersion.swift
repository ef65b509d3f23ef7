import AbleCore
import AbleDBus

/// The version of the `bluetoothd` serving an adapter, read from the adapter's `Modalias`
/// (`usb:v1D6Bp0246dXXXX`, where the device number is the major version in its high byte and the
/// minor in its low byte: `d0542` is 5.66, `d0552` is 5.82), or from text such as `5.82`.
package struct BlueZVersion: Comparable, Sendable, CustomStringConvertible {
    package var major: Int
    package var minor: Int

    package init(_ major: Int, _ minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// Reads `major.minor` (`5.82`, as `bluetoothd --version` prints it); `nil` for anything else.
    package init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let major = Int(parts[0]), let minor = Int(parts[1]) else { return nil }
        self.init(major, minor)
    }

    /// Parses a `Modalias`; `nil` for one that is not BlueZ's own.
    init?(modalias: String) {
        guard modalias.hasPrefix("usb:v1D6Bp0246d"), let number = UInt16(modalias.dropFirst(15).prefix(4), radix: 16)
        else { return nil }
        self.init(Int(number >> 8), Int(number & 0xFF))
    }

    package static func < (lhs: BlueZVersion, rhs: BlueZVersion) -> Bool {
        (lhs.major, lhs.minor) < (rhs.major, rhs.minor)
    }

    package var description: String { "\(major).\(minor)" }

    /// From 5.69 `bluetoothd` asks a server's `AcquireNotify` for a socket per central, naming it
    /// in the `device` option (commit "gatt: Fix not establishing a socket for each device");
    /// before, it asks once, for the first subscriber, and sends what the socket carries to all.
    var acquiresNotifySocketPerCentral: Bool { self >= BlueZVersion(5, 69) }

    /// From 5.76 a value written into a central's notify socket goes to that central only
    /// ("gatt-database: Fix sending notification to all devices"); 5.69 to 5.75 send it to every
    /// subscriber.
    var notifySocketReachesOneCentral: Bool { self >= BlueZVersion(5, 76) }

    /// From 5.69 (and still in 5.87) a central that is not bonded leaving makes `bluetoothd` close
    /// the notify socket of the central that subscribed first to each characteristic it was
    /// subscribed to, although that one stays connected and subscribed (`src/gatt-database.c`:
    /// `clear_ccc_state` calls `ccc_write_cb` with no request, and `match_client_att` then matches
    /// any socket). See ``BlueZServerNotifySockets/recoversSocketsClosedByAnotherCentral``.
    var closesAnotherCentralsNotifySocket: Bool { self >= BlueZVersion(5, 69) }
}

extension BlueZSystem {
    /// The version of the `bluetoothd` that serves `adapter`, if its `Modalias` says.
    func version(of adapter: DBusObjectPath) -> BlueZVersion? {
        (try? tree.properties(of: "org.bluez.Adapter1", at: adapter)?.decode("Modalias", as: String.self))
            .flatMap { $0 }.flatMap(BlueZVersion.init(modalias:))
    }
}
