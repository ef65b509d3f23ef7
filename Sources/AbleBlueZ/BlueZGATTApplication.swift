import AbleCore
import AbleDBus
import AbleIO

/// A GATT server as BlueZ serves it: an application object tree (`GattService1`,
/// `GattCharacteristic1`, `GattDescriptor1` below an `ObjectManager`) registered with
/// `GattManager1.RegisterApplication`. Only `bluetoothd` may call its objects.
///
/// It outlives `bluetoothd`. When the daemon leaves the bus (the object tree's `NameOwnerChanged`)
/// or the adapter's `GattManager1` goes, BlueZ has forgotten the registration and every link;
/// the application reports the centrals' departures and the gap, keeps its exported objects, and
/// when the adapter's `GattManager1` is back (`InterfacesAdded`, after the new daemon's tree is
/// loaded) it calls `RegisterApplication` again, accepting calls from the new daemon's unique
/// name only, and reports that it serves again.
final class BlueZGATTApplication: GATTServerBackend {
    let system: BlueZSystem
    let adapter: DBusObjectPath
    let root: DBusObjectPath
    private let exported = Lock<[DBusObjectPath]>([])
    private let paths = Lock<[AttributeID: DBusObjectPath]>([:])
    private let confirmations = Lock<[AttributeID: [ConfirmationWaiter]]>([:])
    private let watcher = Lock<Task<Void, Never>?>(nil)
    /// The unique bus name of the `bluetoothd` the application is registered with: the only
    /// caller its objects accept. It changes when the daemon restarts.
    private let bluez = Lock<String?>(nil)
    /// Each characteristic's `StartNotify` state, reset when the daemon goes.
    private let notifying = Lock<[AttributeID: Lock<Bool>]>([:])
    private let notifySockets: BlueZServerNotifySockets
    /// The characteristics whose notifications go through acquired sockets.
    private let socketCharacteristics = Lock<Set<AttributeID>>([])
    /// The serving `bluetoothd`'s version, read when the server opens; `nil` if it did not say.
    private let version = Lock<BlueZVersion?>(nil)
    /// The definition served, once open: what its requests said of each central's MTU.
    private let core = Lock<GATTServerCore?>(nil)

    init(system: BlueZSystem, adapter: DBusObjectPath) {
        self.system = system
        self.adapter = adapter
        self.root = DBusObjectPath.unique("/able/gatt_")
        self.notifySockets = BlueZServerNotifySockets(isConnected: { [system, adapter] central in
            guard let path = adapter.appending(central.address.bluezPathComponent) else { return false }
            return (try? system.tree.properties(of: "org.bluez.Device1", at: path)?.decode("Connected", as: Bool.self))
                == true
        })
    }

    func open(_ core: GATTServerCore, events: GATTServerEvents) async throws {
        let connection = system.connection
        let version = system.version(of: adapter)
        self.version.withLock { $0 = version }
        self.core.withLock { $0 = core }
        notifySockets.recoversSocketsClosedByAnotherCentral.withLock {
            $0 = version?.closesAnotherCentralsNotifySocket == true
        }
        guard let owner = try await connection.nameOwner(of: BlueZSystem.service) else {
            throw BluetoothError(.daemonUnavailable, message: "bluetoothd is not running")
        }
        bluez.withLock { $0 = owner }
        let authorize: @Sendable (String) -> Bool = { [bluez] caller in bluez.withLock { $0 == caller } }
        try await connection.exportObjectManager(at: root, authorize: authorize)
        var objects = [root]
        for (serviceIndex, service) in core.definition.services.enumerated() {
            let servicePath = root.appending("service\(serviceIndex)")!
            try await connection.export(
                [
                    DBusInterface(
                        "org.bluez.GattService1",
                        properties: [
                            .constant("UUID", service.uuid.uuidString), .constant("Primary", service.kind == .primary),
                        ])
                ], at: servicePath, authorize: authorize)
            objects.append(servicePath)
            for (index, characteristic) in service.characteristics.enumerated() {
                let id = AttributeID(service: serviceIndex, characteristic: index)
                let path = servicePath.appending("char\(index)")!
                try await connection.export(
                    [characteristicInterface(core, id, characteristic, service: servicePath, events: events)], at: path,
                    authorize: authorize)
                objects.append(path)
                paths.withLock { $0[id] = path }
                if Self.offersNotifySockets(characteristic, version: version) {
                    socketCharacteristics.withLock { _ = $0.insert(id) }
                }
                for (descriptorIndex, descriptor) in characteristic.descriptors.enumerated() {
                    let descriptorID = AttributeID(
                        service: serviceIndex, characteristic: index, descriptor: descriptorIndex)
                    let descriptorPath = path.appending("desc\(descriptorIndex)")!
                    try await connection.export(
                        [descriptorInterface(core, descriptorID, descriptor, characteristic: path)], at: descriptorPath,
                        authorize: authorize)
                    objects.append(descriptorPath)
                }
            }
        }
        exported.withLock { $0 = objects }
        do {
            _ = try await system.call(
                adapter, "org.bluez.GattManager1", "RegisterApplication",
                [.objectPath(root), .dictionary(key: .string, value: .variant, [])])
        } catch {
            // BlueZ may have registered the application although its answer did not reach us (the
            // task was cancelled while waiting): unregister it, from a task that is not cancelled.
            await system.callEvenIfCancelled(
                adapter, "org.bluez.GattManager1", "UnregisterApplication", [.objectPath(root)])
            await unexportAll()
            throw error
        }
        watchCentrals(events, core: core)
    }

    private func characteristicInterface(
        _ core: GATTServerCore, _ id: AttributeID, _ characteristic: Characteristic, service: DBusObjectPath,
        events: GATTServerEvents
    ) -> DBusInterface {
        let notifying = Lock(false)
        self.notifying.withLock { $0[id] = notifying }
        let confirmations = self.confirmations
        let notifySockets = self.notifySockets
        let version = self.version.withLock { $0 }
        // No AcquireWrite, although bluetoothd would then put a characteristic's Write Commands
        // into a socket instead of a WriteValue call each: it queues the writes that arrive while
        // its AcquireWrite call is pending with a pointer into its ATT receive buffer
        // (src/gatt-database.c, pending_write_new keeps `value`, not a copy; 5.66 to at least
        // 5.87), so they reach the socket with the bytes of a later PDU. In the guest, 401 Write
        // Commands sent as a burst all arrived as the last of them.
        var acquisition: [DBusMethod] = []
        var acquisitionProperties: [DBusProperty] = []
        if Self.offersNotifySockets(characteristic, version: version) {
            // bluetoothd calls AcquireNotify instead of StartNotify when the characteristic has a
            // NotifyAcquired property at all (src/gatt-database.c, ccc_write_cb).
            acquisition.append(
                .immediate("AcquireNotify", in: "a{sv}", out: "hq") { call in
                    let options = try GATTRequestOptions(call, argument: 0)
                    // Before 5.69 the one socket serves every subscriber, whoever asked first.
                    let central = version?.acquiresNotifySocketPerCentral == true ? options.central : nil
                    let mtu = options.mtu ?? 23
                    core.noteMTU(options.mtu, of: options.central)
                    let descriptor = try notifySockets.acquire(id, central: central, mtu: mtu, events: events)
                    return [.unixFD(descriptor), .uint16(UInt16(clamping: mtu))]
                })
            acquisitionProperties.append(
                DBusProperty(
                    "NotifyAcquired", signature: .boolean, get: { .boolean(notifySockets.hasSockets(id)) }))
        }
        return DBusInterface(
            "org.bluez.GattCharacteristic1",
            methods: acquisition + [
                Self.readMethod(core, id), Self.writeMethod(core, id),
                .immediate("StartNotify") { _ in
                    guard notifying.withLock({ Self.change(&$0, to: true) }) else { return [] }
                    events.subscriptionChanged(nil, id, true)
                    return []
                },
                .immediate("StopNotify") { _ in
                    guard notifying.withLock({ Self.change(&$0, to: false) }) else { return [] }
                    events.subscriptionChanged(nil, id, false)
                    return []
                },
                .immediate("Confirm") { _ in
                    let waiter = confirmations.withLock { $0[id]?.isEmpty == false ? $0[id]!.removeFirst() : nil }
                    waiter?.confirm()
                    return []
                },
            ],
            properties: [
                .constant("UUID", characteristic.uuid.uuidString), .constant("Service", service),
                .constant("Flags", characteristic.properties.bluezFlags(permissions: characteristic.permissions)),
                DBusProperty("Value", signature: "ay", get: { .bytes(core.storedValue(id)) }),
                DBusProperty("Notifying", signature: .boolean, get: { .boolean(notifying.withLock { $0 }) }),
            ] + acquisitionProperties)
    }

    /// Whether a characteristic's notifications or indications go through sockets `bluetoothd`
    /// acquires: those that notify and do not indicate, and from BlueZ 5.80 also those that
    /// indicate and do not notify. An indication through such a socket is confirmed through it
    /// only from 5.80 on (5.76 to 5.79 confirm it nowhere; through `PropertiesChanged` every
    /// version calls `Confirm`, naming no central). A characteristic that does both stays on
    /// `PropertiesChanged`: `bluetoothd` picks notification or indication by what each central
    /// subscribed to, which the server cannot know.
    static func offersNotifySockets(_ characteristic: Characteristic, version: BlueZVersion?) -> Bool {
        let properties = characteristic.properties
        if properties.contains(.notify) { return !properties.contains(.indicate) }
        return properties.contains(.indicate) && (version ?? BlueZVersion(0, 0)) >= BlueZVersion(5, 80)
    }

    /// Sets `flag` to `value`; returns whether it changed, in one step under the caller's lock.
    private static func change(_ flag: inout Bool, to value: Bool) -> Bool {
        guard flag != value else { return false }
        flag = value
        return true
    }

    private func descriptorInterface(
        _ core: GATTServerCore, _ id: AttributeID, _ descriptor: Descriptor, characteristic: DBusObjectPath
    ) -> DBusInterface {
        DBusInterface(
            "org.bluez.GattDescriptor1",
            methods: [
                Self.readMethod(core, id), Self.writeMethod(core, id),
            ],
            properties: [
                .constant("UUID", descriptor.uuid.uuidString), .constant("Characteristic", characteristic),
                .constant("Flags", descriptor.permissions.bluezDescriptorFlags),
            ])
    }

    /// `ReadValue` of a characteristic or descriptor: answered on the connection's loop as it
    /// arrives when no handler of the attribute may suspend, else in a task of its own.
    static func readMethod(_ core: GATTServerCore, _ id: AttributeID) -> DBusMethod {
        guard core.answersReadsImmediately(id) else {
            return DBusMethod("ReadValue", in: "a{sv}", out: "ay") { call in try await readValue(core, id, call) }
        }
        // Read in place: the options and value are all the request needs, and decoding them into
        // DBusValues first would cost more than answering.
        return .immediateInPlace("ReadValue", in: "a{sv}", out: "ay") { call in
            let options = try GATTRequestOptions(call, argument: 0)
            do {
                return [
                    .bytes(
                        try core.readImmediately(id, central: options.central, offset: options.offset, mtu: options.mtu)
                    )
                ]
            } catch {
                throw reply(error)
            }
        }
    }

    /// `WriteValue` of a characteristic or descriptor, answered as ``readMethod(_:_:)`` answers
    /// `ReadValue`.
    static func writeMethod(_ core: GATTServerCore, _ id: AttributeID) -> DBusMethod {
        guard core.answersWritesImmediately(id) else {
            return DBusMethod("WriteValue", in: "aya{sv}") { call in try await writeValue(core, id, call) }
        }
        return .immediateInPlace("WriteValue", in: "aya{sv}") { call in
            let options = try GATTRequestOptions(call, argument: 1)
            let value = try call.bytes(argument: 0)
            do {
                try core.writeImmediately(
                    id, value: value, offset: options.offset, kind: options.writeKind, central: options.central,
                    mtu: options.mtu, prepared: options.prepareAuthorize)
            } catch {
                throw reply(error)
            }
            return []
        }
    }

    /// Answers `ReadValue` of a characteristic or descriptor.
    static func readValue(_ core: GATTServerCore, _ id: AttributeID, _ call: DBusMethodCall) async throws -> [DBusValue]
    {
        let options = try GATTRequestOptions(call, argument: 0)
        let central = options.central
        let value: [UInt8]
        do {
            value = try await core.read(
                id, central: central, offset: options.offset, mtu: options.mtu,
                abandonment: abandonment(of: call, from: central))
        } catch {
            throw reply(error)
        }
        return [.bytes(value)]
    }

    /// Answers `WriteValue` of a characteristic or descriptor.
    static func writeValue(_ core: GATTServerCore, _ id: AttributeID, _ call: DBusMethodCall) async throws
        -> [DBusValue]
    {
        let options = try GATTRequestOptions(call, argument: 1)
        let value = try call.argument(0, as: [UInt8].self)
        let central = options.central
        do {
            try await core.write(
                id, value: value, offset: options.offset, kind: options.writeKind, central: central,
                mtu: options.mtu, prepared: options.prepareAuthorize, abandonment: abandonment(of: call, from: central))
        } catch {
            throw reply(error)
        }
        return []
    }

    /// How the server answers `call` before its handler returns: with the D-Bus error reply that
    /// BlueZ turns into ``ATTError/unlikelyError``. Only a request that names its central can be
    /// abandoned (see ``RunningRequests``), so one that names none gets no closure made for it.
    static func abandonment(of call: DBusMethodCall, from central: Central?) -> RequestAbandonment? {
        guard central != nil else { return nil }
        return call.earlyAnswer.map { answer in RequestAbandonment { answer.fail(reply(ATTError.unlikelyError)) } }
    }

    /// The error reply that makes BlueZ answer the central with `error`'s ATT code.
    static func reply(_ error: any Error) -> DBusError {
        switch error {
        case let error as ATTError:
            let (name, message) = error.bluezReply
            return DBusError(DBusError.Name(rawValue: name), message)
        case let error as DBusError:
            return error
        default:
            return reply(ATTError.unlikelyError)
        }
    }

    // MARK: Centrals

    /// The devices connected to the adapter, but for the links this process opened as a central.
    var connectedCentrals: [Central] {
        system.tree.objects.compactMap { path, interfaces in
            guard path.parent == adapter, !system.isOutgoingLink(path), let device = interfaces["org.bluez.Device1"],
                (try? device.decode("Connected", as: Bool.self)) == true,
                let address = BluetoothAddress(bluezDevicePath: path)
            else { return nil }
            return Central(address: address)
        }.sorted { $0.address < $1.address }
    }

    /// What BlueZ said of the central's MTU with its latest request to this application (the
    /// `mtu` option of `ReadValue`, `WriteValue` and `AcquireNotify`, sent from BlueZ 5.51 on), while
    /// it is connected. `Device1` has no MTU property, and `StartNotify` carries no options.
    func attMTU(of central: Central) -> Int? {
        // The watcher forgets a central's MTU when its link ends.
        core.withLock { $0 }?.reportedMTU(of: central)
    }

    /// The shortest MTU of the sockets that serve every subscriber (before 5.69, `bluetoothd`
    /// acquires one per characteristic, with the MTU of the central that subscribed first), less 3.
    func unnamedSubscribersMaximumValueLength(of characteristic: AttributeID) -> Int? {
        notifySockets.entries(of: characteristic).filter { $0.central == nil }.map(\.socket.maximumValueLength).min()
    }

    /// Follows the centrals' links and the stack under the application: reports connections and
    /// disconnections, and when `bluetoothd` or the adapter goes, the gap, then registers again
    /// once the adapter's `GattManager1` is back.
    private func watchCentrals(_ events: GATTServerEvents, core: GATTServerCore) {
        let changes = system.tree.changes()
        let adapter = self.adapter
        let system = self.system
        let notifySockets = self.notifySockets
        var connected = Set(connectedCentrals)
        let task = Task { [weak self] in
            // Why each link ended, from BlueZ 5.83's `Device1.Disconnected`, which comes just
            // before the `Connected = false` it explains; earlier versions send none.
            var reasons: [DBusObjectPath: String] = [:]
            var gap: BluetoothError?
            /// A central's link ended (or went with the stack): forget what it told, report it.
            /// `known`: only if it was seen connected (a departure no `Connected = false` announced).
            func left(_ central: Central, reason: String?, known: Bool = true) {
                guard connected.remove(central) != nil || !known else { return }
                core.forgetMTU(of: central)
                // A central whose socket bluetoothd closed by mistake stays subscribed until now.
                for id in notifySockets.centralLeft(central) { events.subscriptionChanged(central, id, false) }
                events.connectionChanged(CentralConnectionChange(central: central, isConnected: false, reason: reason))
            }
            /// The registration is gone with the daemon or the adapter.
            func beginGap(_ error: BluetoothError) {
                guard gap == nil else { return }
                gap = error
                for central in connected.sorted(by: { $0.address < $1.address }) {
                    left(central, reason: error.message)
                }
                reasons = [:]
                self?.forgetStartNotifySubscriptions(events)
                events.servingChanged(ServingChange(isServing: false, reason: error))
            }
            for await change in changes {
                switch change {
                case .serviceLeft:
                    beginGap(BluetoothError(.daemonUnavailable, message: "bluetoothd left the bus"))
                    continue
                case .interfacesRemoved(adapter, let names) where names.contains("org.bluez.GattManager1"):
                    beginGap(BluetoothError(.adapterRemoved, message: "the adapter was removed"))
                    continue
                case .interfacesAdded(adapter, let interfaces) where interfaces["org.bluez.GattManager1"] != nil:
                    guard gap != nil, let self else { continue }
                    if await self.registerAgain() {
                        gap = nil
                        connected = Set(self.connectedCentrals)
                        events.servingChanged(ServingChange(isServing: true))
                    }
                    continue
                case .deviceDisconnected(let path, let name, let message) where path.parent == adapter:
                    reasons[path] = BlueZDisconnectionReason.describe(name, message: message, peer: "the central")
                    continue
                case .interfacesRemoved(let path, let names):
                    let reason = reasons.removeValue(forKey: path)
                    // A device object that goes while connected took its link with it.
                    if path.parent == adapter, names.contains("org.bluez.Device1"),
                        let address = BluetoothAddress(bluezDevicePath: path)
                    {
                        left(Central(address: address), reason: reason)
                    }
                    continue
                default:
                    break
                }
                guard case .propertiesChanged(let path, "org.bluez.Device1", let changed, _) = change,
                    path.parent == adapter,
                    let isConnected = try? changed.decode("Connected", as: Bool.self)
                else { continue }
                let reason = reasons.removeValue(forKey: path)
                guard !system.isOutgoingLink(path), let address = BluetoothAddress(bluezDevicePath: path)
                else { continue }
                let central = Central(address: address)
                if isConnected {
                    connected.insert(central)
                    events.connectionChanged(CentralConnectionChange(central: central, isConnected: true))
                } else {
                    left(central, reason: reason, known: false)
                }
            }
        }
        watcher.withLock { $0 = task }
    }

    /// Ends the subscriptions `bluetoothd` made through `StartNotify`: the daemon that made them
    /// is gone, and the next one starts from none.
    private func forgetStartNotifySubscriptions(_ events: GATTServerEvents) {
        let flags = notifying.withLock { $0 }
        for (id, flag) in flags.sorted(by: {
            ($0.key.service, $0.key.characteristic) < ($1.key.service, $1.key.characteristic)
        }) where flag.withLock({ Self.change(&$0, to: false) }) {
            events.subscriptionChanged(nil, id, false)
        }
    }

    /// Registers the application again with the `bluetoothd` now on the bus, a few times if it
    /// refuses at first (it may still be setting the adapter up); returns whether it took.
    private func registerAgain() async -> Bool {
        for attempt in 0..<5 {
            if attempt > 0 { try? await Task.sleep(for: .seconds(1)) }
            guard !Task.isCancelled, system.tree.interfaces(at: adapter)?["org.bluez.GattManager1"] != nil,
                let owner = system.tree.owner
            else { return false }
            bluez.withLock { $0 = owner }
            do {
                _ = try await system.call(
                    adapter, "org.bluez.GattManager1", "RegisterApplication",
                    [.objectPath(root), .dictionary(key: .string, value: .variant, [])])
                return true
            } catch let error as BluetoothError where error.errorName == "org.bluez.Error.AlreadyExists" {
                return true
            } catch {
                continue
            }
        }
        return false
    }

    func disconnect(_ central: Central) async throws {
        _ = try await system.call(
            adapter.appending(central.address.bluezPathComponent)!, "org.bluez.Device1", "Disconnect")
    }

    // MARK: Sending

    func send(
        _ value: [UInt8], of characteristic: AttributeID, to central: Central?, indicate: Bool, timeout: Duration
    ) async throws {
        guard let path = paths.withLock({ $0[characteristic] }) else { return }
        let version = self.version.withLock { $0 }
        if let central {
            // 5.76 sends what a central's socket carries to that central only; 5.80 confirms an
            // indication through it (see BlueZVersion).
            let needed = indicate ? BlueZVersion(5, 80) : BlueZVersion(5, 76)
            guard let version, version >= needed else {
                throw BluetoothError(
                    .unsupported,
                    message: "\(indicate ? "indicating" : "notifying") one central needs BlueZ \(needed) or later;"
                        + " this bluetoothd is " + (version.map { "\($0)" } ?? "of an unknown version"))
            }
            guard socketCharacteristics.withLock({ $0.contains(characteristic) }) else {
                throw BluetoothError(
                    .unsupported,
                    message:
                        "BlueZ reaches one central only for a characteristic that either notifies or indicates, not both"
                )
            }
            // A central that is not subscribed (or just left) receives nothing.
            let entries = notifySockets.entries(of: characteristic).filter { $0.central == central }
            if entries.isEmpty, notifySockets.orphans(of: characteristic).contains(central) {
                // bluetoothd (5.69 and later) closed its socket when another central left: only
                // PropertiesChanged reaches it now, and that goes to every subscriber.
                guard notifySockets.orphans(of: characteristic) == [central],
                    notifySockets.entries(of: characteristic).isEmpty
                else {
                    throw BluetoothError(
                        .failed,
                        message:
                            "BlueZ \(version) closed the notification socket of \(central) when another central"
                            + " disconnected; it can be reached alone once it subscribes again or is the only subscriber"
                    )
                }
                try await sendThroughPropertiesChanged(
                    value, path: path, of: characteristic, confirmations: indicate ? 1 : 0, timeout: timeout)
                return
            }
            try Self.checkFit(value, into: entries)
            if indicate {
                try await self.indicate(value, through: entries, timeout: timeout)
            } else if let entry = entries.first {
                try? await entry.socket.send(value)
            }
            return
        }
        let orphans = notifySockets.orphans(of: characteristic)
        if !orphans.isEmpty {
            // bluetoothd (5.69 and later) closed a still-subscribed central's socket when another
            // central left: PropertiesChanged reaches every subscriber, socket or not, so it goes
            // alone (written into the sockets too, the others would receive it twice).
            let subscribers = orphans.count + notifySockets.entries(of: characteristic).count
            try await sendThroughPropertiesChanged(
                value, path: path, of: characteristic, confirmations: indicate ? subscribers : 0, timeout: timeout)
            return
        }
        if indicate, socketCharacteristics.withLock({ $0.contains(characteristic) }) {
            let entries = notifySockets.entries(of: characteristic)
            try Self.checkFit(value, into: entries)
            try await self.indicate(value, through: entries, timeout: timeout)
            return
        }
        if !indicate {
            var entries = notifySockets.entries(of: characteristic)
            // BlueZ 5.69 to 5.75 send what any central's socket carries to every subscriber:
            // one socket is enough then.
            if let version, version.acquiresNotifySocketPerCentral, !version.notifySocketReachesOneCentral {
                entries = Array(entries.prefix(1))
            }
            guard entries.isEmpty else {
                try Self.checkFit(value, into: entries)
                for entry in entries {
                    // A socket that ended meanwhile belongs to a central that left.
                    try? await entry.socket.send(value)
                }
                return
            }
            // No socket: BlueZ called StartNotify, or no central is subscribed.
            system.connection.emitPropertiesChanged(
                path: path, interface: "org.bluez.GattCharacteristic1", changed: ["Value": .bytes(value)])
            return
        }
        try await sendThroughPropertiesChanged(
            value, path: path, of: characteristic, confirmations: 1, timeout: timeout)
    }

    /// Refuses a value longer than any of the sockets carries (its ATT MTU less 3, as
    /// `bluetoothd` said when it acquired it), before anything is written into one: `bluetoothd`
    /// would cut it short. The server checks the centrals it knows first; this catches a socket
    /// that serves every subscriber (before 5.69) and a central that subscribed meanwhile.
    static func checkFit(_ value: [UInt8], into entries: [BlueZServerNotifySockets.Entry]) throws {
        let misfits = entries.filter { value.count > $0.socket.maximumValueLength }
        guard !misfits.isEmpty else { return }
        let names = misfits.map { entry in
            "\(entry.central.map { "\($0)" } ?? "every subscriber") can receive \(entry.socket.maximumValueLength)"
        }
        throw BluetoothError(
            .valueTooLong,
            message: "cannot send \(value.count) bytes: " + names.joined(separator: ", ")
                + " (ATT MTU less 3); nothing was sent")
    }

    /// Emits `PropertiesChanged(Value)`, which `bluetoothd` notifies or indicates to every
    /// subscribed central, and waits for `confirmations` calls of `Confirm` (one per central that
    /// confirmed an indication); a waiter leaves the queue if the deadline passes first.
    private func sendThroughPropertiesChanged(
        _ value: [UInt8], path: DBusObjectPath, of characteristic: AttributeID, confirmations count: Int,
        timeout: Duration
    ) async throws {
        let waiters = (0..<count).map { _ in ConfirmationWaiter() }
        confirmations.withLock { $0[characteristic, default: []].append(contentsOf: waiters) }
        system.connection.emitPropertiesChanged(
            path: path, interface: "org.bluez.GattCharacteristic1", changed: ["Value": .bytes(value)])
        guard !waiters.isEmpty else { return }
        do {
            try await withDeadline(timeout, what: "waiting for the indication's confirmation") {
                for waiter in waiters { try await waiter.wait() }
            }
        } catch {
            confirmations.withLock { $0[characteristic]?.removeAll { waiter in waiters.contains { $0 === waiter } } }
            throw error
        }
    }

    /// Writes an indication into each socket and waits for every central's confirmation.
    ///
    /// - Throws: ``BluetoothError/Code/disconnected`` naming the centrals whose socket ended
    ///   before they confirmed (they left); ``BluetoothError/Code/timeout`` naming those that did
    ///   not confirm within `timeout`; `CancellationError`.
    private func indicate(_ value: [UInt8], through entries: [BlueZServerNotifySockets.Entry], timeout: Duration)
        async throws
    {
        var waiting: [(Central?, ConfirmationWaiter, BlueZServerNotifySockets.PendingConfirmations)] = []
        for entry in entries {
            let waiter = ConfirmationWaiter()
            entry.confirmations.append(waiter)
            do {
                try await entry.socket.send(value)
                waiting.append((entry.central, waiter, entry.confirmations))
            } catch {
                // The socket ended meanwhile: that central left before the value went out.
                entry.confirmations.remove(waiter)
            }
        }
        let outcomes = await withTaskGroup(of: (Central?, BluetoothError.Code?).self) { group in
            for (central, waiter, confirmations) in waiting {
                group.addTask {
                    do {
                        try await withDeadline(timeout, what: "waiting for the indication's confirmation") {
                            try await waiter.wait()
                        }
                        return (central, nil)
                    } catch {
                        confirmations.remove(waiter)
                        if waiter.hasEnded { return (central, .disconnected) }
                        return (central, (error as? BluetoothError)?.code ?? .cancelled)
                    }
                }
            }
            var outcomes: [(Central?, BluetoothError.Code?)] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        try Task.checkCancellation()
        func names(_ code: BluetoothError.Code) -> String {
            outcomes.filter { $0.1 == code }.map { $0.0.map { "\($0.address)" } ?? "a central" }.sorted()
                .joined(separator: ", ")
        }
        let left = names(.disconnected)
        if !left.isEmpty {
            throw BluetoothError(.disconnected, message: "\(left) left before confirming the indication")
        }
        let late = names(.timeout)
        if !late.isEmpty {
            throw BluetoothError(.timeout, message: "no confirmation of the indication within \(timeout) from \(late)")
        }
    }

    // MARK: Closing

    func close() async {
        watcher.withLock { $0?.cancel() }
        await notifySockets.closeAll()
        _ = try? await system.call(adapter, "org.bluez.GattManager1", "UnregisterApplication", [.objectPath(root)])
        await unexportAll()
        // Wake indications that will never be confirmed now.
        for waiter in confirmations.withLock({ table in
            defer { table.removeAll() }
            return table.values.flatMap { $0 }
        }) {
            waiter.confirm()
        }
    }

    private func unexportAll() async {
        for path in exported.withLock({ $0 }).reversed() { await system.connection.unexport(path) }
        exported.withLock { $0 = [] }
    }
}

/// One indication waiting for BlueZ's `Confirm`: confirmed at most once, and its waiting task
/// can be cancelled.
final class ConfirmationWaiter: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<Void, any Error>)
        case confirmed
        case cancelled
        /// No confirmation can come any more: the central's socket ended.
        case ended
    }

    private let state = Lock(State.pending)

    func wait() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume: Result<Void, any Error>? = state.withLock { state in
                    switch state {
                    case .pending:
                        state = .waiting(continuation)
                        return nil
                    case .confirmed: return .success(())
                    case .cancelled, .waiting, .ended: return .failure(CancellationError())
                    }
                }
                if let resume { continuation.resume(with: resume) }
            }
        } onCancel: {
            finish(.cancelled)
        }
    }

    func confirm() { finish(.confirmed) }

    /// Ends the wait without a confirmation: the central left.
    func end() { finish(.ended) }

    /// Whether the wait ended because the central left.
    var hasEnded: Bool {
        state.withLock { state in
            if case .ended = state { return true }
            return false
        }
    }

    private func finish(_ final: State) {
        let continuation: CheckedContinuation<Void, any Error>? = state.withLock { state in
            switch state {
            case .pending:
                state = final
                return nil
            case .waiting(let continuation):
                state = final
                return continuation
            case .confirmed, .cancelled, .ended:
                return nil
            }
        }
        if case .confirmed = final {
            continuation?.resume()
        } else {
            continuation?.resume(throwing: CancellationError())
        }
    }
}
