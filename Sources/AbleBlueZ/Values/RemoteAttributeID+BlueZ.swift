import AbleCore
import AbleDBus

/// BlueZ names a remote device's GATT objects after their ATT handles, in hex:
/// `…/dev_XX_…/service000a/char000b/desc000d` (`src/gatt-client.c`, `"%s/service%04x"` and
/// the like), so an attribute's identity is its chain of handles and its path is rebuilt from
/// them.
extension RemoteAttributeID {
    private static let kinds = ["service", "char", "desc"]

    /// The identity of the object at `path` under the device object `device`, or `nil` if `path`
    /// is not a GATT object of that device.
    init?(path: DBusObjectPath, device: DBusObjectPath) {
        let prefix = device.rawValue + "/"
        guard path.rawValue.hasPrefix(prefix) else { return nil }
        let names = path.rawValue.dropFirst(prefix.count).split(separator: "/")
        guard (1...Self.kinds.count).contains(names.count) else { return nil }
        var handles: [UInt16] = []
        for (name, kind) in zip(names, Self.kinds) {
            // Four lowercase digits, as BlueZ prints them: another spelling would name another
            // path than the one rebuilt from the handle.
            let digits = name.utf8.dropFirst(kind.count)
            guard name.hasPrefix(kind), digits.count == 4, !digits.contains(where: { (0x41...0x46).contains($0) }),
                let handle = Hex.parse(digits, as: UInt16.self)
            else { return nil }
            handles.append(handle)
        }
        self.init(handles)
    }

    /// The path of the object this identity names under the device object `device`.
    ///
    /// Every request on an attribute rebuilds its path: it is made in one string, and not checked
    /// again, since a valid device path followed by `/`, a kind's letters and four hex digits per
    /// level is a valid path.
    func path(device: DBusObjectPath) -> DBusObjectPath? {
        guard (1...Self.kinds.count).contains(components.count) else { return nil }
        var text = device.rawValue
        text.reserveCapacity(text.utf8.count + components.count * 13)
        for (kind, handle) in zip(Self.kinds, components) {
            text += "/"
            text += kind
            text += Hex.format(handle, digits: 4)
        }
        return DBusObjectPath(unchecked: text)
    }
}
