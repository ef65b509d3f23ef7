package import AbleCore
package import AbleDBus

extension BluetoothAddress {
    /// Parses an address from the name BlueZ gives a device's object, such as `dev_00_AA_01_01_00_01`.
    ///
    /// BlueZ names each device object `/org/bluez/hciN/dev_XX_XX_XX_XX_XX_XX`; this is the last
    /// component of that path.
    ///
    /// - Parameter bluezPathComponent: The component, with its `dev_` prefix.
    /// - Returns: `nil` if `bluezPathComponent` is not in that form.
    package init?(bluezPathComponent: some StringProtocol) {
        // Read in place: a component is longer than Swift stores inline, so a copy would be an
        // allocation, and a server makes this address for every request.
        let parsed = bluezPathComponent.utf8.withContiguousStorageIfAvailable(Self.parseComponent)
        guard let address = parsed ?? Array(bluezPathComponent.utf8).withUnsafeBufferPointer(Self.parseComponent)
        else { return nil }
        self = address
    }

    /// Parses an address from the UTF-8 of a device's object path, as
    /// ``init(bluezDevicePath:)`` does.
    package init?(bluezDevicePathUTF8 path: UnsafeBufferPointer<UInt8>) {
        guard let slash = path.lastIndex(of: UInt8(ascii: "/")),
            let address = Self.parseComponent(UnsafeBufferPointer(rebasing: path[(slash + 1)...]))
        else { return nil }
        self = address
    }

    private static func parseComponent(_ utf8: UnsafeBufferPointer<UInt8>) -> BluetoothAddress? {
        guard utf8.starts(with: "dev_".utf8) else { return nil }
        return BluetoothAddress(utf8: UnsafeBufferPointer(rebasing: utf8.dropFirst(4)), separator: UInt8(ascii: "_"))
    }

    /// Parses an address from the object path of a device, such as
    /// `/org/bluez/hci0/dev_00_AA_01_01_00_01`, read in place.
    ///
    /// - Returns: `nil` if the path's last component is not a device's name.
    package init?(bluezDevicePath path: DBusObjectPath) {
        let text = path.rawValue
        guard let slash = text.utf8.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        self.init(bluezPathComponent: text[text.utf8.index(after: slash)...])
    }

    /// The name BlueZ gives this device's object, such as `dev_00_AA_01_01_00_01`.
    ///
    /// BlueZ names each device object `/org/bluez/hciN/dev_XX_XX_XX_XX_XX_XX`; this is the last
    /// component of that path.
    package var bluezPathComponent: String {
        "dev_" + format(separator: "_")
    }
}
