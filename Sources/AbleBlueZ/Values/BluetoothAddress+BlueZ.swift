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
        let utf8 = Array(bluezPathComponent.utf8)
        guard utf8.starts(with: "dev_".utf8) else { return nil }
        self.init(utf8: utf8.dropFirst(4), separator: UInt8(ascii: "_"))
    }

    /// The name BlueZ gives this device's object, such as `dev_00_AA_01_01_00_01`.
    ///
    /// BlueZ names each device object `/org/bluez/hciN/dev_XX_XX_XX_XX_XX_XX`; this is the last
    /// component of that path.
    package var bluezPathComponent: String {
        "dev_" + format(separator: "_")
    }
}
