package import Able

extension BluetoothAddress {
    /// Parses an address from the name BlueZ gives a device's object, such as `dev_00_AA_01_01_00_01`.
    ///
    /// BlueZ names each device object `/org/bluez/hciN/dev_XX_XX_XX_XX_XX_XX`; this is the last
    /// component of that path.
    ///
    /// - Parameter bluezPathComponent: The component, with its `dev_` prefix.
    /// - Returns: `nil` if `bluezPathComponent` is not in that form.
    package init?(bluezPathComponent: some StringProtocol) {
        var component = String(bluezPathComponent)
        let address = component.withUTF8 { utf8 -> BluetoothAddress? in
            guard utf8.starts(with: "dev_".utf8) else { return nil }
            let address = UnsafeBufferPointer(rebasing: utf8.dropFirst(4))
            return BluetoothAddress(utf8: address, separator: UInt8(ascii: "_"))
        }
        guard let address else { return nil }
        self = address
    }

    /// The name BlueZ gives this device's object, such as `dev_00_AA_01_01_00_01`.
    ///
    /// BlueZ names each device object `/org/bluez/hciN/dev_XX_XX_XX_XX_XX_XX`; this is the last
    /// component of that path.
    package var bluezPathComponent: String {
        "dev_" + format(separator: "_")
    }
}
