/// Answers what pairing asks of the user: confirming a number, entering a passkey.
///
/// Able registers the agent with BlueZ for the duration of ``Peripheral/pair(with:timeout:)``, or
/// as an adapter's standing agent with ``Adapter/setPairingAgent(_:asSystemDefault:)``. The
/// default, ``justWorks``, accepts every confirmation and has no passkey to give, which is what
/// pairing without a display or keyboard amounts to.
///
/// A pairing's agent is asked only about the device being paired. Everything else (a request
/// about another device, and every ``authorizeService`` question) goes to the standing agent of
/// the device's adapter, and is refused when the adapter has none.
public struct PairingAgent: Sendable {
    /// What the device can do for pairing, as BlueZ's agent capability names it.
    public struct Capability: RawRepresentable, Sendable, Hashable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Shows a number and asks yes or no (`DisplayYesNo`).
        public static let displayYesNo = Capability(rawValue: "DisplayYesNo")
        /// Shows a passkey only (`DisplayOnly`).
        public static let displayOnly = Capability(rawValue: "DisplayOnly")
        /// Can type a passkey (`KeyboardOnly`).
        public static let keyboardOnly = Capability(rawValue: "KeyboardOnly")
        /// Can show and type (`KeyboardDisplay`).
        public static let keyboardDisplay = Capability(rawValue: "KeyboardDisplay")
        /// Neither (`NoInputNoOutput`).
        public static let noInputNoOutput = Capability(rawValue: "NoInputNoOutput")
    }

    /// The agent's capability.
    public var capability: Capability
    /// Asked to confirm that `passkey` is shown on both sides; `true` accepts.
    public var confirm: @Sendable (_ device: BluetoothAddress, _ passkey: UInt32) async -> Bool
    /// Asked for the passkey the other side shows; `nil` refuses.
    public var passkey: @Sendable (_ device: BluetoothAddress) async -> UInt32?
    /// Told to show `passkey` to the user.
    public var display: @Sendable (_ device: BluetoothAddress, _ passkey: UInt32) async -> Void
    /// Asked whether `device` may use the local profile or service `service`; `true` allows it.
    /// Asked of the standing agent only; by default it refuses.
    ///
    /// The corresponding BlueZ method is `org.bluez.Agent1.AuthorizeService`.
    public var authorizeService: @Sendable (_ device: BluetoothAddress, _ service: BluetoothUUID) async -> Bool

    /// An agent with `capability` that answers with these closures.
    ///
    /// - Parameters:
    ///   - capability: What the device can do for pairing.
    ///   - confirm: Asked to confirm a passkey shown on both sides; `true` accepts.
    ///   - passkey: Asked for the passkey the other side shows; `nil` refuses. By default it refuses.
    ///   - display: Told to show a passkey. By default it does nothing.
    ///   - authorizeService: Asked whether a device may use a local service; by default it refuses.
    public init(
        capability: Capability,
        confirm: @escaping @Sendable (BluetoothAddress, UInt32) async -> Bool,
        passkey: @escaping @Sendable (BluetoothAddress) async -> UInt32? = { _ in nil },
        display: @escaping @Sendable (BluetoothAddress, UInt32) async -> Void = { _, _ in },
        authorizeService: @escaping @Sendable (BluetoothAddress, BluetoothUUID) async -> Bool = { _, _ in false }
    ) {
        self.capability = capability
        self.confirm = confirm
        self.passkey = passkey
        self.display = display
        self.authorizeService = authorizeService
    }

    /// Accepts every confirmation (capability `DisplayYesNo`, which BlueZ pairs with on both
    /// sides of the guest's emulated link; see DESIGN.md).
    public static let justWorks = PairingAgent(capability: .displayYesNo, confirm: { _, _ in true })
}
