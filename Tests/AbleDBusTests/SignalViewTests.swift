import AbleDBus
import AbleIO
import AbleTestSupport
import Synchronization
import Testing

/// Signals read in place (`DBusSignalView`), as Able's notification streams and object tree read them.
@Suite(.timeLimit(.minutes(1)))
struct SignalViewTests {
    struct Reading: Sendable, Equatable {
        /// What `changedByteArray` said: `nil` when the signal is not about the interface.
        var change: Change?
        var failed: Bool
        var valueOnly: Bool
        var decodedArguments: Int
    }

    struct Change: Sendable, Equatable {
        var bytes: [UInt8]?
        var isOnlyChange: Bool
    }

    static let properties = "org.freedesktop.DBus.Properties"

    @Test func aChangedByteArrayIsReadInPlaceAndOtherShapesAreTold() async throws {
        try await withPrivateBus { bus, receiver in
            let emitter = try await bus.connect()
            let readings = Lock<[Reading]>([])
            let count = Atomic<Int>(0)
            let subscription = try await receiver.subscribe(
                matching: DBusMatchRule(path: "/char", interface: Self.properties, member: "PropertiesChanged"),
                readingInPlace: { view in
                    var reading = Reading(
                        change: nil, failed: false,
                        valueOnly: view.changesOnly(property: "Value", of: "org.example.Characteristic"),
                        decodedArguments: (try? view.decoded().arguments.count) ?? -1)
                    do {
                        reading.change = try view.changedByteArray(named: "Value", of: "org.example.Characteristic")
                            .map { Change(bytes: $0.bytes, isOnlyChange: $0.isOnlyChange) }
                    } catch {
                        // A malformed signal is an invalid-arguments error, made only when thrown.
                        #expect((error as? DBusError)?.name == .invalidArgs)
                        reading.failed = true
                    }
                    readings.withLock { $0.append(reading) }
                    count.add(1, ordering: .relaxed)
                })
            defer { subscription.cancel() }
            func emit(_ interface: String, _ changed: [String: DBusVariant]) throws {
                try emitter.emitSignal(
                    path: "/char", interface: Self.properties, member: "PropertiesChanged",
                    arguments: [.string(interface), changed.dbusValue, [String]().dbusValue])
            }
            try emit("org.example.Characteristic", ["Value": DBusVariant([UInt8]([1, 2, 3]))])
            try emit("org.example.Characteristic", ["Value": DBusVariant([UInt8]())])
            try emit("org.example.Characteristic", ["Notifying": DBusVariant(true)])
            try emit(
                "org.example.Characteristic", ["Value": DBusVariant([UInt8]([4])), "Notifying": DBusVariant(true)])
            try emit("org.example.Characteristic", ["Value": DBusVariant("not bytes")])
            // Another interface in argument 0: not about the characteristic.
            try emit("org.example.Other", ["Value": DBusVariant([UInt8]([9]))])
            try emitter.emitSignal(
                path: "/char", interface: Self.properties, member: "PropertiesChanged",
                arguments: [.string("org.example.Characteristic"), .uint32(7)])
            while count.load(ordering: .relaxed) < 7 { try await Task.sleep(for: .milliseconds(5)) }
            try await Task.sleep(for: .milliseconds(50))
            let all = readings.withLock { $0 }
            #expect(
                all == [
                    Reading(
                        change: Change(bytes: [1, 2, 3], isOnlyChange: true), failed: false, valueOnly: true,
                        decodedArguments: 3),
                    Reading(
                        change: Change(bytes: [], isOnlyChange: true), failed: false, valueOnly: true,
                        decodedArguments: 3),
                    Reading(
                        change: Change(bytes: nil, isOnlyChange: false), failed: false, valueOnly: false,
                        decodedArguments: 3),
                    Reading(
                        change: Change(bytes: [4], isOnlyChange: false), failed: false, valueOnly: false,
                        decodedArguments: 3),
                    Reading(change: nil, failed: true, valueOnly: true, decodedArguments: 3),
                    Reading(change: nil, failed: false, valueOnly: false, decodedArguments: 3),
                    Reading(change: nil, failed: true, valueOnly: false, decodedArguments: 2),
                ])
        }
    }
}
