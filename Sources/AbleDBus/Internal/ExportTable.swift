/// The objects a connection exports. Queue-confined, like the core that owns it.
struct ExportTable {
    struct Object {
        var interfaces: [String: DBusInterface]
        var authorize: (@Sendable (String) -> Bool)?
        var isObjectManager: Bool
    }

    private(set) var objects: [DBusObjectPath: Object] = [:]

    subscript(path: DBusObjectPath) -> Object? { objects[path] }

    mutating func insert(_ object: Object, at path: DBusObjectPath) -> Bool {
        guard objects[path] == nil else { return false }
        objects[path] = object
        return true
    }

    mutating func remove(_ path: DBusObjectPath) -> Object? {
        objects.removeValue(forKey: path)
    }

    mutating func removeAll() {
        objects.removeAll()
    }

    /// The closest object manager above `path` (not `path` itself).
    func objectManager(above path: DBusObjectPath) -> DBusObjectPath? {
        var current = path.parent
        while let candidate = current {
            if objects[candidate]?.isObjectManager == true { return candidate }
            current = candidate.parent
        }
        return nil
    }

    /// The names of the nodes directly below `path` that lead to exported objects.
    func childNodes(of path: DBusObjectPath) -> [String] {
        var names = Set<String>()
        let prefix = path == .root ? "/" : path.rawValue + "/"
        for objectPath in objects.keys where objectPath.rawValue.hasPrefix(prefix) {
            let rest = objectPath.rawValue.dropFirst(prefix.count)
            if let first = rest.split(separator: "/").first { names.insert(String(first)) }
        }
        return names.sorted()
    }

    /// Every object strictly below `root`, for `GetManagedObjects`.
    func objects(below root: DBusObjectPath) -> [(DBusObjectPath, Object)] {
        objects.filter { $0.key.isDescendant(of: root, includingSelf: false) }.sorted { $0.key < $1.key }
    }
}

extension DBusInterface {
    /// `a{sv}` of every readable property; properties whose getter throws are left out.
    func propertyValues() -> DBusValue {
        var entries: [DBusDictionaryEntry] = []
        for property in properties {
            guard let value = try? property.get() else { continue }
            entries.append(DBusDictionaryEntry(key: .string(property.name), value: .variant(value)))
        }
        return .dictionary(key: .string, value: .variant, entries)
    }
}

enum Introspection {
    static func xml(for object: ExportTable.Object?, children: [String]) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        if let object {
            xml += standardInterfaces(objectManager: object.isObjectManager)
            for interface in object.interfaces.values.sorted(by: { $0.name < $1.name }) {
                xml += "  <interface name=\"\(interface.name)\">\n"
                for method in interface.methods {
                    xml += "    <method name=\"\(method.name)\">\n"
                    xml += arguments(method.inputSignature, direction: "in")
                    xml += arguments(method.outputSignature, direction: "out")
                    xml += "    </method>\n"
                }
                for property in interface.properties {
                    let access = property.set == nil ? "read" : "readwrite"
                    xml +=
                        "    <property name=\"\(property.name)\" type=\"\(property.signature)\" access=\"\(access)\"/>\n"
                }
                for signal in interface.signals {
                    xml += "    <signal name=\"\(signal.name)\">\n"
                    xml += arguments(signal.signature, direction: nil)
                    xml += "    </signal>\n"
                }
                xml += "  </interface>\n"
            }
        } else {
            xml += standardInterfaces(objectManager: false)
        }
        for child in children { xml += "  <node name=\"\(child)\"/>\n" }
        return xml + "</node>\n"
    }

    private static func arguments(_ signature: DBusSignature, direction: String?) -> String {
        signature.completeTypes.map { type in
            let directionAttribute = direction.map { " direction=\"\($0)\"" } ?? ""
            return "      <arg type=\"\(type)\"\(directionAttribute)/>\n"
        }.joined()
    }

    private static func standardInterfaces(objectManager: Bool) -> String {
        var xml = """
              <interface name="org.freedesktop.DBus.Introspectable">
                <method name="Introspect"><arg name="xml_data" type="s" direction="out"/></method>
              </interface>
              <interface name="org.freedesktop.DBus.Properties">
                <method name="Get"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="out"/></method>
                <method name="GetAll"><arg type="s" direction="in"/><arg type="a{sv}" direction="out"/></method>
                <method name="Set"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="in"/></method>
                <signal name="PropertiesChanged"><arg type="s"/><arg type="a{sv}"/><arg type="as"/></signal>
              </interface>

            """
        if objectManager {
            xml += """
                  <interface name="org.freedesktop.DBus.ObjectManager">
                    <method name="GetManagedObjects"><arg type="a{oa{sa{sv}}}" direction="out"/></method>
                    <signal name="InterfacesAdded"><arg type="o"/><arg type="a{sa{sv}}"/></signal>
                    <signal name="InterfacesRemoved"><arg type="o"/><arg type="as"/></signal>
                  </interface>

                """
        }
        return xml
    }
}
