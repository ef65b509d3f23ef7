/// A signal received from the bus.
public struct DBusSignal: Sendable, CustomStringConvertible {
    /// The unique bus name of the sender (for example `:1.42`).
    public var sender: String
    /// The object that emitted the signal.
    public var path: DBusObjectPath
    /// The signal's interface.
    public var interface: String
    /// The signal's name.
    public var member: String
    /// The signal's arguments.
    public var arguments: [DBusValue]

    /// Creates a signal, for testing code that handles signals without a bus.
    public init(sender: String, path: DBusObjectPath, interface: String, member: String, arguments: [DBusValue]) {
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
    }

    public var description: String { "\(interface).\(member) from \(sender) at \(path): \(arguments)" }
}

/// A method call made to an object this process exports.
public struct DBusMethodCall: Sendable {
    /// The caller's unique bus name (for example `:1.42`): check it before acting on the call.
    public var sender: String
    /// The called object's path.
    public var path: DBusObjectPath
    /// The interface named in the call.
    public var interface: String
    /// The method's name.
    public var member: String
    /// The call's arguments, already checked against the method's input signature.
    public var arguments: [DBusValue]
    /// How the call can be answered before its asynchronous handler returns; `nil` for an
    /// immediate handler and for a call made without a bus.
    package var earlyAnswer: DBusEarlyAnswer?

    /// Creates a call, for testing handlers without a bus.
    public init(sender: String, path: DBusObjectPath, interface: String, member: String, arguments: [DBusValue]) {
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
    }

    /// Converts argument `index` to a Swift type.
    ///
    /// - Throws: ``DBusError`` (``DBusError/Name/invalidArgs``) when there is no such argument or it
    ///   has another type; thrown from a method handler, it becomes the error reply.
    @inlinable public func argument<T: DBusRepresentable>(_ index: Int, as type: T.Type = T.self) throws(DBusError) -> T
    {
        guard arguments.indices.contains(index) else {
            throw DBusError(.invalidArgs, "\(member): missing argument \(index)")
        }
        do {
            return try T(dbusValue: arguments[index])
        } catch {
            throw DBusError(.invalidArgs, "\(member) argument \(index): \(error.message)")
        }
    }
}
