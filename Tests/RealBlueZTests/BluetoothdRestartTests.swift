import AbleDBus
import Testing

extension RealBlueZ {
    @Suite(.timeLimit(.minutes(2)))
    struct BluetoothdRestart {
        @Test func aRestartIsSeenAsANewOwnerOfOrgBluezAndTheAdaptersComeBack() async throws {
            try await withSystemBus { bus in
                let adapters = [Guest.central, Guest.peripheral].map(BlueZ.adapterPath)
                let oldOwner = try #require(try await bus.nameOwner(of: BlueZ.service), "org.bluez has no owner")
                let addresses = try await bus.bluezObjects().addresses(of: adapters)
                let ownerChanges = try await bus.nameOwnerChanges(of: BlueZ.service)
                let interfacesAdded = try await bus.signals(
                    matching: DBusMatchRule(
                        sender: BlueZ.service, path: .root, interface: BlueZ.objectManager, member: "InterfacesAdded"))

                #expect(try await Guest.restartBluetoothd() == 0, "restart-bluetoothd failed (its errors are above)")

                let what = "org.bluez to lose its owner and get a new one"
                let changes = try await withDeadline(.seconds(30), waitingFor: what) {
                    var changes: [DBusConnection.NameOwnerChange] = []
                    for try await change in ownerChanges {
                        changes.append(change)
                        if change.newOwner != nil { return changes }
                    }
                    throw StreamEnded(waitingFor: what)
                }
                try #require(changes.count == 2, "owner changes: \(changes)")
                #expect(changes[0].oldOwner == oldOwner)
                #expect(changes[0].newOwner == nil)
                #expect(changes[1].oldOwner == nil)
                let newOwner = try #require(changes[1].newOwner)
                #expect(newOwner != oldOwner)
                #expect(try await bus.nameOwner(of: BlueZ.service) == newOwner)

                let tree = try await poll(timeout: .seconds(30), waitingFor: "both adapters on D-Bus and powered") {
                    () async -> ObjectTree? in
                    guard let tree = try? await bus.bluezObjects(timeout: .seconds(5)) else { return nil }
                    let powered = adapters.allSatisfy {
                        (try? tree[$0, BlueZ.adapter1]?.decode("Powered", as: Bool.self)) == true
                    }
                    return powered ? tree : nil
                }
                #expect(tree.addresses(of: adapters) == addresses)

                // A subscription to the well-known name follows it to its new owner.
                let announced = "InterfacesAdded of both adapters from the new bluetoothd"
                let senders = try await withDeadline(.seconds(10), waitingFor: announced) {
                    var senders: [DBusObjectPath: String] = [:]
                    for try await signal in interfacesAdded {
                        let path = try signal.arguments[0].decode(DBusObjectPath.self)
                        let interfaces = try signal.arguments[1].decode([String: ObjectTree.Properties].self)
                        if interfaces[BlueZ.adapter1] != nil { senders[path] = signal.sender }
                        if adapters.allSatisfy({ senders[$0] != nil }) { return senders }
                    }
                    throw StreamEnded(waitingFor: announced)
                }
                #expect(Set(senders.values) == [newOwner])
            }
        }
    }
}
