/// A central connected to this GATT server.
public struct Central: Sendable, Hashable, CustomStringConvertible {
    /// The central's address.
    public var address: BluetoothAddress
    public var description: String { "central \(address)" }

    package init(address: BluetoothAddress) {
        self.address = address
    }
}

/// A read of a characteristic or descriptor, as a handler sees it.
public struct ReadRequest: Sendable {
    /// The UUID of the characteristic or descriptor read.
    public var uuid: BluetoothUUID
    /// The UUID of the characteristic a descriptor belongs to (`nil` for characteristics).
    public var characteristicUUID: BluetoothUUID?
    /// Who reads, when BlueZ says.
    public var central: Central?
    /// Where in the value the read starts (long reads come in pieces).
    public var offset: Int
    /// The link's ATT MTU, when BlueZ says.
    public var mtu: Int?
    /// The value stored now.
    public var storedValue: [UInt8]
}

/// A write to a characteristic or descriptor, as a handler sees it.
public struct WriteRequest: Sendable {
    /// How the central wrote.
    public enum Kind: Sendable, Hashable {
        /// A Write Request: the central waits for the answer.
        case request
        /// A Write Command: no answer goes back.
        case command
        /// Part of a reliable (prepared) write.
        case reliable
    }

    /// The UUID of the characteristic or descriptor written.
    public var uuid: BluetoothUUID
    /// The UUID of the characteristic a descriptor belongs to (`nil` for characteristics).
    public var characteristicUUID: BluetoothUUID?
    /// The bytes written.
    public var value: [UInt8]
    /// Where in the attribute's value they go.
    public var offset: Int
    /// How the central wrote.
    ///
    /// - Important: BlueZ does not tell a GATT server how a central wrote (its `WriteValue`
    ///   options have no write type), so on BlueZ this is ``Kind/request`` for a Write Command
    ///   too; the simulated radio reports ``Kind/command``.
    public var kind: Kind
    /// Who writes, when BlueZ says.
    public var central: Central?
    /// The link's ATT MTU, when BlueZ says.
    public var mtu: Int?
    /// The value stored now, before this write.
    public var storedValue: [UInt8]
    /// Whether this is the first piece of a long or reliable write being prepared (an ATT
    /// Prepare Write Request) rather than applied: the handler authorizes the write, and nothing
    /// is stored whatever it answers. Throw an ``ATTError`` (such as
    /// ``ATTError/insufficientAuthorization``) to refuse it, and with it the whole write. When the
    /// central executes the write, every piece comes again in order, with its ``offset`` and
    /// this flag off.
    ///
    /// Only characteristics with ``AttributePermissions/authorizePreparedWrites`` are asked, and
    /// only about the first piece of each write, as BlueZ does; BlueZ passes this as the
    /// `prepare-authorize` option of `WriteValue`.
    public var isPrepared: Bool = false
}

/// What a write handler answers.
public enum WriteResponse: Sendable, Hashable {
    /// Accept the write and store the resulting value (the default behaviour of a server
    /// without handlers).
    case store
    /// Accept the write and store nothing: the handler keeps the value itself.
    case accept
}
