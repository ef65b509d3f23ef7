/// An interface of an object that this process exports: its methods, properties and signals.
///
/// `org.freedesktop.DBus.Properties`, `org.freedesktop.DBus.Introspectable` and (for object
/// manager roots) `org.freedesktop.DBus.ObjectManager` are provided by the connection; do not
/// declare them.
public struct DBusInterface: Sendable {
    /// The interface's name, for example `org.bluez.GattCharacteristic1`.
    public var name: String
    /// Its methods.
    public var methods: [DBusMethod]
    /// Its properties.
    public var properties: [DBusProperty]
    /// The signals it emits, for introspection.
    public var signals: [DBusSignalDeclaration]

    /// An interface named `name` (such as `org.bluez.GattCharacteristic1`) with its members.
    public init(
        _ name: String, methods: [DBusMethod] = [], properties: [DBusProperty] = [],
        signals: [DBusSignalDeclaration] = []
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }
}

/// A method of an exported interface.
public struct DBusMethod: Sendable {
    /// How a method runs.
    public enum Handler: Sendable {
        /// Runs in a task of its own; it may suspend. The task starts at once on the
        /// connection's event loop, as the call is dispatched, and runs there until the handler first
        /// suspends (a handler that answers without suspending costs no hop at all); after that it
        /// runs on the global executor. Like any code on the loop, it must not block before it
        /// suspends: long synchronous work belongs after an `await` or in a task of its own.
        case async(@Sendable (DBusMethodCall) async throws -> [DBusValue])
        /// Runs on the connection's event loop as the call is dispatched, with no task and no hop. It
        /// must return quickly and never block.
        case immediate(@Sendable (DBusMethodCall) throws -> [DBusValue])
    }

    /// The method's name.
    public var name: String
    /// The signature its arguments must have; a call with other arguments is answered with
    /// `org.freedesktop.DBus.Error.InvalidArgs` and never reaches the handler.
    public var inputSignature: DBusSignature
    /// The signature of the values it returns.
    public var outputSignature: DBusSignature
    /// What runs for each call.
    public var handler: Handler
    /// For a method declared with ``immediateInPlace(_:in:out:handler:)``, what runs for each call
    /// that reaches the connection: ``handler`` then serves only calls made without a bus.
    package var inPlaceHandler: (@Sendable (DBusMethodCallView) throws -> [DBusValue])?

    /// Declares a method whose handler may suspend.
    ///
    /// The handler returns the reply's values, or throws: a ``DBusError`` becomes an error reply
    /// with its name and message; any other error becomes `org.freedesktop.DBus.Error.Failed`.
    public init(
        _ name: String, in inputSignature: DBusSignature = "", out outputSignature: DBusSignature = "",
        handler: @escaping @Sendable (DBusMethodCall) async throws -> [DBusValue]
    ) {
        self.name = name
        self.inputSignature = inputSignature
        self.outputSignature = outputSignature
        self.handler = .async(handler)
    }

    /// Declares a method answered on the connection's event loop, without a task: for quick handlers.
    public static func immediate(
        _ name: String, in inputSignature: DBusSignature = "", out outputSignature: DBusSignature = "",
        handler: @escaping @Sendable (DBusMethodCall) throws -> [DBusValue]
    ) -> DBusMethod {
        var method = DBusMethod(name, in: inputSignature, out: outputSignature) { _ in [] }
        method.handler = .immediate(handler)
        return method
    }

    /// Declares a method answered on the connection's event loop, without a task, that reads its
    /// arguments in place (``DBusMethodCallView``) instead of decoding them: for the hottest
    /// handlers. Its ``handler`` encodes a ``DBusMethodCall``'s arguments into a message and reads
    /// them the same way, so the method also answers calls made without a bus.
    package static func immediateInPlace(
        _ name: String, in inputSignature: DBusSignature = "", out outputSignature: DBusSignature = "",
        handler: @escaping @Sendable (DBusMethodCallView) throws -> [DBusValue]
    ) -> DBusMethod {
        var method = DBusMethod.immediate(name, in: inputSignature, out: outputSignature) { call in
            try DBusMethodCallView.withCall(
                sender: call.sender, path: call.path, interface: call.interface, member: call.member,
                arguments: call.arguments, handler)
        }
        method.inPlaceHandler = handler
        return method
    }
}

/// A property of an exported interface, served through `org.freedesktop.DBus.Properties`.
///
/// Getters and setters run on the connection's event loop and must not block: keep the value in a
/// `Mutex` or another synchronous store.
public struct DBusProperty: Sendable {
    /// The property's name.
    public var name: String
    /// Its signature.
    public var signature: DBusSignature
    /// Reads the current value. A thrown ``DBusError`` is returned to the caller of `Get`.
    public var get: @Sendable () throws -> DBusValue
    /// Writes a value (already checked against ``signature``); `nil` makes the property read-only.
    /// The first argument is the caller's unique name.
    public var set: (@Sendable (_ sender: String, _ value: DBusValue) throws -> Void)?
    /// Whether a successful `Set` emits `PropertiesChanged` with the new value.
    public var emitsChangedSignal: Bool

    /// A property named `name` of type `signature`, read with `get` and, when `set` is given, writable.
    public init(
        _ name: String, signature: DBusSignature, emitsChangedSignal: Bool = true,
        get: @escaping @Sendable () throws -> DBusValue,
        set: (@Sendable (_ sender: String, _ value: DBusValue) throws -> Void)? = nil
    ) {
        self.name = name
        self.signature = signature
        self.get = get
        self.set = set
        self.emitsChangedSignal = emitsChangedSignal
    }

    /// A read-only property with a constant value.
    public static func constant<T: DBusRepresentable>(_ name: String, _ value: T) -> DBusProperty {
        let dbusValue = value.dbusValue
        return DBusProperty(name, signature: T.dbusSignature, get: { dbusValue })
    }
}

/// A signal an exported interface emits, listed in its introspection data.
public struct DBusSignalDeclaration: Sendable {
    /// The signal's name.
    public var name: String
    /// The signature of its arguments.
    public var signature: DBusSignature

    /// Declares the signal `name` with arguments of `signature`.
    public init(_ name: String, signature: DBusSignature = "") {
        self.name = name
        self.signature = signature
    }
}
