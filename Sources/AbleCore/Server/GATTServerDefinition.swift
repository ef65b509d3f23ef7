/// Everything a GATT server serves and how it answers, as declared with ``GATTServerBuilder``.
///
/// A definition is a value: store it and start servers from it as often as needed.
public struct GATTServerDefinition: Sendable {
    /// Answers a read with the value, or throws an ``ATTError``; it runs in a task and may suspend.
    ///
    /// ``OnRead`` takes one when it is declared without `answering:`, whether or not its body
    /// awaits.
    public typealias ReadHandler = @Sendable (ReadRequest) async throws -> [UInt8]
    /// Answers a write, or throws an ``ATTError``; it runs in a task and may suspend.
    ///
    /// ``OnWrite`` takes one when it is declared without `answering:`, whether or not its body
    /// awaits.
    public typealias WriteHandler = @Sendable (WriteRequest) async throws -> WriteResponse
    /// Answers a read with the value, or throws an ``ATTError``, without suspending: the server
    /// answers the request as it arrives (on BlueZ, on the thread that reads the D-Bus connection),
    /// with no task made for it. It must return quickly and never block.
    ///
    /// ``OnRead`` takes one when it is declared with `answering: .immediately`.
    public typealias ImmediateReadHandler = @Sendable (ReadRequest) throws -> [UInt8]
    /// Answers a write, or throws an ``ATTError``, without suspending, as
    /// ``ImmediateReadHandler`` answers a read.
    ///
    /// ``OnWrite`` takes one when it is declared with `answering: .immediately`.
    public typealias ImmediateWriteHandler = @Sendable (WriteRequest) throws -> WriteResponse

    /// How an ``OnRead`` or ``OnWrite`` handler answers when it does not run in a task.
    ///
    /// A handler declared without `answering:` always runs in a task and may suspend; one declared
    /// with `answering: .immediately` never does, so adding or removing an `await` in a body never
    /// changes how its requests are served: it compiles as before or not at all.
    public enum Answering: Sendable, Hashable {
        /// The handler is called as the request arrives and its answer goes out at once, with no
        /// task made for the request; it cannot suspend (see ``ImmediateReadHandler``).
        case immediately
    }

    /// The services, in declaration order.
    public var services: [Service] = []
    /// Whether the server manages its centrals (see ``AutoManageDevices``).
    public var managesDevicesAutomatically = false

    /// The read handlers, by the attributes they answer for.
    var reads = HandlerTable<StoredReadHandler>()
    /// The write handlers, by the attributes they answer for.
    var writes = HandlerTable<StoredWriteHandler>()
    var connectionHandlers: [@Sendable (GATTServer, CentralConnectionChange) async -> Void] = []
    var subscriptionHandlers: [@Sendable (GATTServer, Central?, BluetoothUUID, Bool) async -> Void] = []
    var stateHandlers: [@Sendable (GATTServer, Bool) async -> Void] = []
    var servingHandlers: [@Sendable (GATTServer, ServingChange) async -> Void] = []
    /// Declaration mistakes, reported by ``validate()``.
    private(set) var problems: [String] = []

    /// Builds a definition from a block of components.
    public init(@GATTServerBuilder _ content: () -> [any GATTServerComponent]) {
        for component in content() { component.apply(to: &self) }
    }

    mutating func add<Handler>(
        _ handler: Handler, for selection: AttributeSelection, to table: WritableKeyPath<Self, HandlerTable<Handler>>,
        component: String
    ) {
        problems += self[keyPath: table].add(handler, for: selection, component: component)
    }

    /// Checks the definition: no duplicate handlers, no UUID declared twice where a handler could
    /// not tell them apart, no handler for an attribute that does not exist where its identifier
    /// says (a characteristic in its service, a descriptor in its characteristic).
    ///
    /// Two services may hold characteristics of the same UUID (the server's methods take a
    /// ``CharacteristicIdentifier``, which names the service too), but an ``OnRead`` or
    /// ``OnWrite`` may not name such a UUID: its handler could not tell which is meant.
    ///
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/invalidArguments``, listing every problem.
    public func validate() throws {
        var problems = self.problems
        var serviceUUIDs = Set<BluetoothUUID>()
        var characteristicUUIDs = Set<BluetoothUUID>()
        var declared = Set<AttributePath>()
        var sharedCharacteristicUUIDs = Set<BluetoothUUID>()
        for service in services {
            if !serviceUUIDs.insert(service.uuid).inserted {
                problems.append("service \(service.uuid) is declared twice")
            }
            var ownCharacteristicUUIDs = Set<BluetoothUUID>()
            for characteristic in service.characteristics {
                if !ownCharacteristicUUIDs.insert(characteristic.uuid).inserted {
                    problems.append(
                        "characteristic \(characteristic.uuid) is declared twice in service \(service.uuid)")
                } else if !characteristicUUIDs.insert(characteristic.uuid).inserted {
                    sharedCharacteristicUUIDs.insert(characteristic.uuid)
                }
                declared.insert(AttributePath(service: service.uuid, characteristic: characteristic.uuid))
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
                    declared.insert(
                        AttributePath(
                            service: service.uuid, characteristic: characteristic.uuid, descriptor: descriptor.uuid))
                }
            }
        }
        for path in reads.named.union(writes.named) where !declared.contains(path) {
            problems.append("a handler names \(path), which the definition does not declare")
        }
        for path in reads.named.union(writes.named) where sharedCharacteristicUUIDs.contains(path.characteristic) {
            problems.append(
                "a handler names \(path), whose characteristic UUID several services declare: "
                    + "its handler could not tell them apart")
        }
        guard problems.isEmpty else {
            throw BluetoothError(
                .invalidArguments, message: "invalid GATT server: " + problems.sorted().joined(separator: "; "))
        }
    }
}

/// Where an attribute a handler names sits: its service, characteristic and descriptor (if any),
/// by UUID.
struct AttributePath: Hashable, Sendable, CustomStringConvertible {
    var service: BluetoothUUID
    var characteristic: BluetoothUUID
    var descriptor: BluetoothUUID?

    var description: String {
        let characteristic = "characteristic \(characteristic) of service \(service)"
        return descriptor.map { "descriptor \($0) of \(characteristic)" } ?? characteristic
    }
}

/// The handlers of one kind (reads or writes), by the attributes they answer for.
///
/// A characteristic is found by its UUID alone: ``GATTServerDefinition/validate()`` refuses a
/// handler that names a characteristic UUID two services hold; a descriptor by its
/// characteristic's UUID and its own.
struct HandlerTable<Handler: Sendable>: Sendable {
    struct DescriptorKey: Hashable, Sendable {
        var characteristic: BluetoothUUID
        var descriptor: BluetoothUUID
    }

    private(set) var characteristics: [BluetoothUUID: Handler] = [:]
    private(set) var descriptors: [DescriptorKey: Handler] = [:]
    private(set) var anyCharacteristic: Handler?
    private(set) var anyDescriptor: Handler?
    /// Every attribute a handler names, for ``GATTServerDefinition/validate()``.
    private(set) var named: Set<AttributePath> = []

    /// The handler that answers for `characteristic`, or its descriptor `descriptor`: the one that
    /// names it, else the one for any characteristic or any descriptor.
    func handler(for characteristic: BluetoothUUID, descriptor: BluetoothUUID?) -> Handler? {
        guard let descriptor else { return characteristics[characteristic] ?? anyCharacteristic }
        return descriptors[DescriptorKey(characteristic: characteristic, descriptor: descriptor)] ?? anyDescriptor
    }

    /// Adds `handler` for the attributes `selection` selects.
    ///
    /// - Returns: The declaration mistakes: attributes that already had a handler of this kind.
    mutating func add(_ handler: Handler, for selection: AttributeSelection, component: String) -> [String] {
        var problems: [String] = []
        switch selection.targets {
        case .characteristics(let paths), .descriptors(let paths):
            for path in paths {
                let previous: Handler?
                if let descriptor = path.descriptor {
                    let key = DescriptorKey(characteristic: path.characteristic, descriptor: descriptor)
                    previous = descriptors.updateValue(handler, forKey: key)
                } else {
                    previous = characteristics.updateValue(handler, forKey: path.characteristic)
                }
                named.insert(path)
                if previous != nil { problems.append("two \(component) handlers for \(path)") }
            }
        case .anyCharacteristic:
            if anyCharacteristic != nil { problems.append("two \(component)(.anyCharacteristic) handlers") }
            anyCharacteristic = handler
        case .anyDescriptor:
            if anyDescriptor != nil { problems.append("two \(component)(.anyDescriptor) handlers") }
            anyDescriptor = handler
        }
        return problems
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

    init(immediate handler: @escaping GATTServerDefinition.ImmediateReadHandler) { body = .immediate(handler) }
    init(inTask handler: @escaping GATTServerDefinition.ReadHandler) { body = .async(handler) }
}

/// A write handler, as the definition's tables keep it.
struct StoredWriteHandler: Sendable {
    enum Body: Sendable {
        case immediate(GATTServerDefinition.ImmediateWriteHandler)
        case async(GATTServerDefinition.WriteHandler)
    }
    let body: Body

    init(immediate handler: @escaping GATTServerDefinition.ImmediateWriteHandler) { body = .immediate(handler) }
    init(inTask handler: @escaping GATTServerDefinition.WriteHandler) { body = .async(handler) }
}
