/// Which signals a subscription receives: the fields of a D-Bus match rule.
///
/// The rule is installed in the bus daemon with `AddMatch` and, because the daemon routes to a
/// connection every signal that any of its rules matches, checked again locally for each
/// subscriber. A `nil` field matches anything.
public struct DBusMatchRule: Hashable, Sendable, CustomStringConvertible {
    /// The sender: a unique name (`:1.42`), or a well-known name that the daemon resolves.
    ///
    /// Locally, a well-known sender is compared with the owner the connection last saw for it
    /// when the subscription started; see ``DBusConnection/signals(matching:bufferLimit:)``.
    public var sender: String?
    /// The exact object path.
    public var path: DBusObjectPath?
    /// An object path and everything below it.
    public var pathNamespace: DBusObjectPath?
    /// The interface.
    public var interface: String?
    /// The signal name.
    public var member: String?
    /// Required string values of leading arguments, by index (`arg0`, `arg1`, …).
    public var arguments: [Int: String]

    /// A rule; each `nil` field matches anything.
    public init(
        sender: String? = nil, path: DBusObjectPath? = nil, pathNamespace: DBusObjectPath? = nil,
        interface: String? = nil, member: String? = nil, arguments: [Int: String] = [:]
    ) {
        self.sender = sender
        self.path = path
        self.pathNamespace = pathNamespace
        self.interface = interface
        self.member = member
        self.arguments = arguments
    }

    /// The rule in the daemon's text form, for example `type='signal',interface='org.bluez.Adapter1'`.
    public var description: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            // Match rule values are quoted with '; a quote inside is written as '\''.
            parts.append("\(key)='\(value.replacingAll("'", with: "'\\''"))'")
        }
        add("sender", sender)
        add("path", path?.rawValue)
        add("path_namespace", pathNamespace?.rawValue)
        add("interface", interface)
        add("member", member)
        for (index, value) in arguments.sorted(by: { $0.key < $1.key }) { add("arg\(index)", value) }
        return parts.joined(separator: ",")
    }

    /// Whether a signal satisfies the rule. `stringArgument` gives the signal's argument at an
    /// index when it is a string; `senderOwner` gives the unique name that owns a well-known
    /// ``sender``, when it is known (asked only when the sender is not that name).
    func matches(
        sender signalSender: String, path signalPath: String, interface signalInterface: String,
        member signalMember: String, argument stringArgument: (Int) -> String?,
        senderOwner: (String) -> String?
    ) -> Bool {
        // The header fields first, cheapest and most often different; then the sender, which may
        // need its owner looked up.
        if let interface, interface != signalInterface { return false }
        if let member, member != signalMember { return false }
        if let path, path.rawValue != signalPath { return false }
        // Names and paths are ASCII: their bytes are compared, not their characters (which
        // `hasPrefix` would, at a cost on every signal).
        if let pathNamespace, pathNamespace != .root {
            let namespace = pathNamespace.rawValue.utf8
            guard signalPath.utf8.starts(with: namespace) else { return false }
            let rest = signalPath.utf8.dropFirst(namespace.count)
            guard rest.isEmpty || rest.first == UInt8(ascii: "/") else { return false }
        }
        if let sender, sender != signalSender {
            // A well-known name matches the signals of its owner at the time of subscription; the
            // bus itself sends under its own name, and unique names have no other owner.
            guard sender.utf8.first != UInt8(ascii: ":"), sender != "org.freedesktop.DBus",
                senderOwner(sender) == signalSender
            else { return false }
        }
        for (index, expected) in arguments {
            guard stringArgument(index) == expected else { return false }
        }
        return true
    }
}

extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        result.reserveCapacity(utf8.count)
        for character in self {
            if character == target { result += replacement } else { result.append(character) }
        }
        return result
    }
}
