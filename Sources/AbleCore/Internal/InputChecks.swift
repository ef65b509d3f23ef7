/// The checks the public entry points make on what a user passes in, before any backend (and so
/// BlueZ or the kernel) sees it: what cannot work is refused with a typed ``BluetoothError`` that
/// says why, the same on every backend, instead of a trap, a silent clamp or an error whose
/// text only BlueZ explains.
package enum InputChecks {
    /// The longest value an attribute can hold (Bluetooth Core 5.4, Vol 3, Part F, 3.2.9).
    package static let maximumAttributeLength = 512
    /// The longest local name an adapter can have, in bytes of UTF-8 (HCI `Write_Local_Name`).
    package static let maximumAdapterNameLength = 248

    /// A name BlueZ can give an adapter: the last element of its object path (`hci0`), so
    /// letters, digits and underscores only.
    package static func adapterName(_ name: String) throws(BluetoothError) {
        guard !name.isEmpty else {
            throw BluetoothError(.invalidArguments, message: "an adapter name cannot be empty: use Adapter.default()")
        }
        guard name.utf8.count <= 64,
            name.utf8.allSatisfy({ byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
            })
        else {
            throw BluetoothError(
                .invalidArguments,
                message: "'\(name.prefix(64))' is not an adapter name: use one such as hci0 (letters, digits, _)")
        }
    }

    /// The name an adapter shows to others.
    package static func alias(_ alias: String) throws(BluetoothError) {
        guard alias.utf8.count <= maximumAdapterNameLength else {
            throw BluetoothError(
                .valueTooLong,
                message: "an adapter name of \(alias.utf8.count) bytes is over the \(maximumAdapterNameLength) bytes "
                    + "a controller holds")
        }
    }

    /// A timeout: zero or more.
    package static func timeout(_ timeout: Duration, of what: String) throws(BluetoothError) {
        guard timeout >= .zero else {
            throw BluetoothError(.invalidArguments, message: "a timeout for \(what) cannot be negative (\(timeout))")
        }
    }

    /// A read offset into an attribute's value.
    package static func readOffset(_ offset: Int) throws(BluetoothError) {
        guard (0..<maximumAttributeLength).contains(offset) else {
            throw BluetoothError(
                .invalidOffset,
                message: "a read offset must be 0 to \(maximumAttributeLength - 1), not \(offset)")
        }
    }

    /// A value for an attribute.
    package static func attributeValue(_ value: [UInt8]) throws(BluetoothError) {
        guard value.count <= maximumAttributeLength else {
            throw BluetoothError(
                .valueTooLong, message: "\(value.count) bytes exceed the \(maximumAttributeLength)-byte attribute limit"
            )
        }
    }

    /// An advertisement: a name that is not empty, durations that are not negative, and data that
    /// fits legacy advertising.
    package static func advertisement(_ advertisement: Advertisement) throws {
        if let name = advertisement.localName, name.isEmpty {
            throw BluetoothError(
                .invalidArguments, message: "an advertised name cannot be empty: leave localName nil for none")
        }
        for (label, duration) in [("timeout", advertisement.timeout), ("duration", advertisement.duration)] {
            if let duration, duration <= .zero {
                throw BluetoothError(
                    .invalidArguments, message: "an advertisement's \(label) must be above zero, not \(duration)")
            }
        }
        try advertisement.validateLegacyLength()
    }

    /// A PSM to listen on: ``PSM/automatic`` or one of the LE ranges.
    package static func listeningPSM(_ psm: PSM) throws(BluetoothError) {
        guard psm == .automatic || psm.isLE else {
            throw BluetoothError(.invalidArguments, message: "\(psm) is not an LE PSM: use 0x0001–0x00FF, or automatic")
        }
    }

    /// A PSM to connect to: one of the LE ranges, not ``PSM/automatic``.
    package static func peerPSM(_ psm: PSM) throws(BluetoothError) {
        guard psm != .automatic else {
            throw BluetoothError(.invalidArguments, message: "connect to a PSM the peer listens on, not PSM 0")
        }
        guard psm.isLE else {
            throw BluetoothError(.invalidArguments, message: "\(psm) is not an LE PSM: use 0x0001–0x00FF")
        }
    }

    /// A receive MTU for an LE credit-based channel.
    package static func receiveMTU(_ mtu: Int?) throws(BluetoothError) {
        guard let mtu else { return }
        guard (23...65_535).contains(mtu) else {
            throw BluetoothError(.invalidArguments, message: "a receive MTU of \(mtu) is outside 23–65,535")
        }
    }
}

extension PSM {
    /// Whether the PSM is in the LE ranges: fixed 0x0001–0x007F, dynamic 0x0080–0x00FF.
    var isLE: Bool { isFixed || isDynamic }
}
