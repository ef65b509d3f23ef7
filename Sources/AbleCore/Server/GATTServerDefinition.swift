/// Everything a GATT server serves and how it answers, as declared with ``GATTServerBuilder``.
///
/// A definition is a value: store it and start servers from it as often as needed.
public struct GATTServerDefinition: Sendable {
    /// Answers a read with the value, or throws an ``ATTError``. It may suspend.
    public typealias ReadHandler = @Sendable (ReadRequest) async throws -> [UInt8]
    /// Answers a write, or throws an ``ATTError``. It may suspend.
    public typealias WriteHandler = @Sendable (WriteRequest) async throws -> WriteResponse
    /// Answers a read with the value, or throws an ``ATTError``, without suspending: the server
    /// answers the request as it arrives (on BlueZ, on the thread that reads the D-Bus connection),
    /// with no task made for it.
    /// It must return quickly and never block.
    public typealias ImmediateReadHandler = @Sendable (ReadRequest) throws -> [UInt8]
    /// Answers a write, or throws an ``ATTError``, without suspending, as
    /// ``ImmediateReadHandler`` answers a read.
    public typealias ImmediateWriteHandler = @Sendable (WriteRequest) throws -> WriteResponse

    /// The services, in declaration order.
    public var services: [Service] = []
    /// Whether the server manages its centrals (see ``AutoManageDevices``).
    public var managesDevicesAutomatically = false

    var characteristicReads: [BluetoothUUID: StoredReadHandler] = [:]
    var characteristicWrites: [BluetoothUUID: StoredWriteHandler] = [:]
    var descriptorReads: [BluetoothUUID: StoredReadHandler] = [:]
    var descriptorWrites: [BluetoothUUID: StoredWriteHandler] = [:]
    var anyCharacteristicRead: StoredReadHandler?
    var anyCharacteristicWrite: StoredWriteHandler?
    var anyDescriptorRead: StoredReadHandler?
    var anyDescriptorWrite: StoredWriteHandler?
    var connectionHandlers: [@Sendable (GATTServer, CentralConnectionChange) async -> Void] = []
    var subscriptionHandlers: [@Sendable (GATTServer, Central?, BluetoothUUID, Bool) async -> Void] = []
    var stateHandlers: [@Sendable (GATTServer, Bool) async -> Void] = []
    /// Declaration mistakes, reported by ``validate()``.
    private(set) var problems: [String] = []

    /// Builds a definition from a block of components.
    public init(@GATTServerBuilder _ content: () -> [any GATTServerComponent]) {
        for component in content() { component.apply(to: &self) }
    }

    mutating func add<Handler>(
        _ uuids: [BluetoothUUID], _ handler: Handler, to table: WritableKeyPath<Self, [BluetoothUUID: Handler]>,
        kind: String
    ) {
        for uuid in uuids {
            if self[keyPath: table][uuid] != nil { problems.append("two \(kind) handlers for \(uuid)") }
            self[keyPath: table][uuid] = handler
        }
    }

    mutating func setCatchAll<Handler>(_ slot: WritableKeyPath<Self, Handler?>, _ handler: Handler, kind: String) {
        if self[keyPath: slot] != nil { problems.append("two \(kind) handlers") }
        self[keyPath: slot] = handler
    }

    /// Checks the definition: no duplicate handlers, no UUID declared twice where a handler could
    /// not tell them apart, no handler for an attribute that does not exist.
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/invalidArguments``, listing every problem.
    public func validate() throws {
        var problems = self.problems
        var serviceUUIDs = Set<BluetoothUUID>()
        var characteristicUUIDs = Set<BluetoothUUID>()
        var descriptorUUIDs = Set<BluetoothUUID>()
        for service in services {
            if !serviceUUIDs.insert(service.uuid).inserted {
                problems.append("service \(service.uuid) is declared twice")
            }
            for characteristic in service.characteristics {
                if !characteristicUUIDs.insert(characteristic.uuid).inserted {
                    problems.append("characteristic \(characteristic.uuid) is declared twice")
                }
                if characteristic.value.count > 512 {
                    problems.append("characteristic \(characteristic.uuid) starts with more than 512 bytes")
                }
                var ownDescriptorUUIDs = Set<BluetoothUUID>()
                for descriptor in characteristic.descriptors {
                    if !ownDescriptorUUIDs.insert(descriptor.uuid).inserted {
                        problems.append(
                            "descriptor \(descriptor.uuid) is declared twice in characteristic \(characteristic.uuid)")
                    }
                    if descriptor.value.count > InputChecks.maximumAttributeLength {
                        problems.append("descriptor \(descriptor.uuid) starts with more than 512 bytes")
                    }
                    if descriptor.uuid == .clientCharacteristicConfiguration {
                        problems.append("characteristic \(characteristic.uuid) declares a CCCD: BlueZ provides it")
                    }
                    descriptorUUIDs.insert(descriptor.uuid)
                }
            }
        }
        for uuid in Set(characteristicReads.keys).union(characteristicWrites.keys)
        where !characteristicUUIDs.contains(uuid) {
            problems.append("a handler names characteristic \(uuid), which no service declares")
        }
        for uuid in Set(descriptorReads.keys).union(descriptorWrites.keys) where !descriptorUUIDs.contains(uuid) {
            problems.append("a handler names descriptor \(uuid), which no characteristic declares")
        }
        guard problems.isEmpty else {
            throw BluetoothError(
                .invalidArguments, message: "invalid GATT server: " + problems.sorted().joined(separator: "; "))
        }
    }
}

// A handler is kept in a struct of its own type, not bare: a function stored in a dictionary or
// an optional is kept at the generic abstraction, and every lookup wraps it in a reabstraction
// thunk, which is an allocation for every request the server answers.

/// A read handler, as the definition's tables keep it.
struct StoredReadHandler: Sendable {
    enum Body: Sendable {
        case immediate(GATTServerDefinition.ImmediateReadHandler)
        case async(GATTServerDefinition.ReadHandler)
    }
    let body: Body

    init(_ handler: @escaping GATTServerDefinition.ImmediateReadHandler) { body = .immediate(handler) }
    init(_ handler: @escaping GATTServerDefinition.ReadHandler) { body = .async(handler) }
}

/// A write handler, as the definition's tables keep it.
struct StoredWriteHandler: Sendable {
    enum Body: Sendable {
        case immediate(GATTServerDefinition.ImmediateWriteHandler)
        case async(GATTServerDefinition.WriteHandler)
    }
    let body: Body

    init(_ handler: @escaping GATTServerDefinition.ImmediateWriteHandler) { body = .immediate(handler) }
    init(_ handler: @escaping GATTServerDefinition.WriteHandler) { body = .async(handler) }
}
