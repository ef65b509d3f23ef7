import AbleDBus
import Testing

extension RealBlueZ {
    @Suite(.timeLimit(.minutes(1)))
    struct Adapters {
        @Test func theObjectTreeListsBothAdaptersWithDistinctWellFormedAddresses() async throws {
            try await withSystemBus { bus in
                let tree = try await bus.bluezObjects()
                var addresses: [String] = []
                for adapter in [Guest.central, Guest.peripheral] {
                    let path = BlueZ.adapterPath(adapter)
                    let properties = try #require(tree[path, BlueZ.adapter1], "no \(BlueZ.adapter1) at \(path)")
                    let address = try #require(try properties.decode("Address", as: String.self))
                    #expect(BlueZ.isWellFormedAddress(address), "\(adapter) has the address \(address)")
                    let read = try await bus.bluezProperty("Address", of: BlueZ.adapter1, at: path, as: String.self)
                    #expect(read == address)
                    addresses.append(address)
                }
                #expect(Set(addresses).count == 2, "the adapters' addresses: \(addresses)")
            }
        }

        @Test(arguments: [Guest.central, Guest.peripheral])
        func poweringAnAdapterOffAndOnEmitsPoweredFalseThenTrue(adapter: String) async throws {
            try await withSystemBus { bus in
                let path = BlueZ.adapterPath(adapter)
                let powered = { try await bus.bluezProperty("Powered", of: BlueZ.adapter1, at: path, as: Bool.self) }
                try #require(try await powered(), "\(adapter) is not powered to begin with")
                let changes = try await bus.signals(
                    matching: DBusMatchRule(
                        sender: BlueZ.service, path: path, interface: BlueZ.properties, member: "PropertiesChanged",
                        arguments: [0: BlueZ.adapter1]))

                let announced = try await withCleanup {
                    try await bus.setBlueZProperty("Powered", of: BlueZ.adapter1, at: path, to: false)
                    #expect(try await powered() == false)
                    try await bus.setBlueZProperty("Powered", of: BlueZ.adapter1, at: path, to: true)
                    return try await withDeadline(.seconds(10), waitingFor: "two changes of Powered") {
                        var values: [Bool] = []
                        for try await signal in changes {
                            let changed = try signal.arguments[1].decode(ObjectTree.Properties.self)
                            if let value = try changed.decode("Powered", as: Bool.self) { values.append(value) }
                            if values.count == 2 { return values }
                        }
                        throw StreamEnded(waitingFor: "two changes of Powered")
                    }
                } cleanup: {
                    do {
                        try await bus.setBlueZProperty("Powered", of: BlueZ.adapter1, at: path, to: true)
                    } catch {
                        Issue.record(error, "could not power \(adapter) on again")
                    }
                }
                #expect(announced == [false, true])
                #expect(try await powered() == true)
            }
        }
    }
}
