import Able
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
    func path(device: DBusObjectPath) -> DBusObjectPath? {
        guard (1...Self.kinds.count).contains(components.count) else { return nil }
        let names = zip(Self.kinds, components).map { kind, handle in kind + Hex.format(handle, digits: 4) }
        return DBusObjectPath(rawValue: device.rawValue + "/" + names.joined(separator: "/"))
    }
}
