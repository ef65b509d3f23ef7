import Able
import AbleDBus
import AbleScenarios
import AbleTestSupport
import Foundation
import Testing

@testable import AbleBlueZ

/// `AcquireWrite` and `AcquireNotify` against the fake BlueZ: sockets granted, refused, and
/// closed by BlueZ's end.
@Suite(.timeLimit(.minutes(1)))
struct AcquiredSocketTests {
    let peripheralTests = PeripheralTests()

    /// Reads one message from BlueZ's end of a socket, waiting for it.
    static func receive(from socket: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        return count > 0 ? Array(buffer.prefix(count)) : nil
    }

    @Test func writesWithoutResponseGoIntoTheGrantedSocketAndNotOverTheBus() async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = nil
            try await peripheral.connect(timeout: .safetyNet)
            let values = (1...50).map { [UInt8($0), 0xEE] }
            try await peripheral.writeWithoutResponse(values, to: SeedCharacteristic.a1)
            #expect(device.acquisitions.value == ["AcquireWrite:char0011"])
            let end = try #require(device.socketEnds.value["AcquireWrite:char0011"])
            var received: [[UInt8]] = []
            for _ in values { received.append(try #require(Self.receive(from: end))) }
            #expect(received == values)
            #expect(!device.calls.value.contains("WriteValue:command"))

            // The socket's MTU of 23 bounds a value at 20 bytes, and the error says so.
            let error = await #expect(throws: BluetoothError.self) {
                try await peripheral.write(
                    Array(repeating: 0, count: 21), to: SeedCharacteristic.a1, type: .withoutResponse)
            }
            #expect(error?.code == .valueTooLong)
            #expect(error?.message.contains("ATT MTU of 23 allows 1 to 20 bytes") == true)
        }
    }

    @Test(arguments: ["org.bluez.Error.NotSupported", "org.bluez.Error.NotPermitted"])
    func aRefusedAcquireWriteFallsBackToWriteValue(refusal: String) async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = (refusal, "refused")
            try await peripheral.connect(timeout: .safetyNet)
            try await peripheral.write([1], to: SeedCharacteristic.a1, type: .withoutResponse)
            try await peripheral.write([2], to: SeedCharacteristic.a1, type: .withoutResponse)
            #expect(device.calls.value.filter { $0 == "WriteValue:command" }.count == 2)
            // NotSupported stays true for the connection; NotPermitted (another client holds the
            // socket) may not, so each write asks again.
            let expectedAsks = refusal.hasSuffix("NotSupported") ? 1 : 2
            #expect(device.acquisitions.value.count == expectedAsks)
        }
    }

    @Test func aWriteAfterARefusalToACharacteristicThatIsGoneReportsItGoneAndSendsNothing() async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = ("org.bluez.Error.NotSupported", "refused")
            try await peripheral.connect(timeout: .safetyNet)
            try await peripheral.write([1], to: SeedCharacteristic.a1, type: .withoutResponse)
            // The refusal is remembered by path; the characteristic then leaves, as after a
            // Service Changed indication, and the peripheral has seen it leave.
            let changes = await peripheral.serviceChanges()
            await device.connection.unexport(device.characteristicPath(0, 0))
            for await change in changes
            where change.removedCharacteristics.contains(where: { $0.uuid == SeedCharacteristic.a1.uuid }) {
                break
            }
            let error = await #expect(throws: BluetoothError.self) {
                try await peripheral.write([2], to: SeedCharacteristic.a1, type: .withoutResponse)
            }
            #expect(error?.code == .attributeRemoved, "\(String(describing: error))")
            #expect(device.calls.value.filter { $0 == "WriteValue:command" }.count == 1)
            #expect(device.acquisitions.value.count == 1)
        }
    }

    @Test func aSocketBlueZClosedIsAcquiredAgainOnTheNextWrite() async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = nil
            try await peripheral.connect(timeout: .safetyNet)
            try await peripheral.write([1], to: SeedCharacteristic.a1, type: .withoutResponse)
            let first = try #require(device.socketEnds.value["AcquireWrite:char0011"])
            close(first)
            // A write that finds the socket closed fails as a disconnect; one after it acquires anew.
            try await waitUntil {
                (try? await peripheral.write([2], to: SeedCharacteristic.a1, type: .withoutResponse)) != nil
            }
            #expect(device.acquisitions.value.count == 2)
            let second = try #require(device.socketEnds.value["AcquireWrite:char0011"])
            #expect(Self.receive(from: second) == [2])
        }
    }

    /// Writes without response after the first go straight into the socket, without the
    /// peripheral's actor; a write with response still releases it (BlueZ refuses other writes
    /// while it is held), and the next write without response acquires a new one rather than
    /// use the released one.
    @Test func aWriteWithResponseReleasesTheSocketAndTheNextWriteWithoutResponseAcquiresAnother() async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = nil
            try await peripheral.connect(timeout: .safetyNet)
            for value in 1...3 {
                try await peripheral.write([UInt8(value)], to: SeedCharacteristic.a1, type: .withoutResponse)
            }
            let first = try #require(device.socketEnds.value["AcquireWrite:char0011"])
            #expect(
                [Self.receive(from: first), Self.receive(from: first), Self.receive(from: first)] == [[1], [2], [3]])
            try await peripheral.write([4], to: SeedCharacteristic.a1)
            #expect(device.calls.value.filter { $0.hasPrefix("WriteValue") } == ["WriteValue:request"])
            #expect(Self.receive(from: first) == nil)
            try await peripheral.write([5], to: SeedCharacteristic.a1, type: .withoutResponse)
            #expect(device.acquisitions.value == ["AcquireWrite:char0011", "AcquireWrite:char0011"])
            let second = try #require(device.socketEnds.value["AcquireWrite:char0011"])
            #expect(Self.receive(from: second) == [5])
        }
    }

    @Test(arguments: [
        ("org.bluez.Error.NotSupported", BluetoothError.Code.notSupported),
        ("org.bluez.Error.NotPermitted", .notPermitted),
        ("org.bluez.Error.InProgress", .inProgress),
    ])
    func aRefusedAcquireNotifyFailsASocketStreamAndFallsBackForAnAutomaticOne(
        refusal: String, code: BluetoothError.Code
    ) async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = (refusal, "refused")
            try await peripheral.connect(timeout: .safetyNet)
            let error = await #expect(throws: BluetoothError.self) {
                try await peripheral.notifications(of: SeedCharacteristic.b2, delivery: .socket)
            }
            #expect(error?.code == code)
            #expect(!device.calls.value.contains { $0.hasPrefix("StartNotify") })
            let stream = try await peripheral.notifications(of: SeedCharacteristic.b2, delivery: .automatic)
            #expect(device.calls.value.contains("StartNotify:char0024"))
            device.notify(1, 1, [7])
            var iterator = stream.makeAsyncIterator()
            #expect(try await iterator.next() == [7])
        }
    }

    @Test func notificationsComeFromTheSocketAndEndWithATypedErrorWhenBlueZClosesIt() async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = nil
            try await peripheral.connect(timeout: .safetyNet)
            let stream = try await peripheral.notifications(of: SeedCharacteristic.b2, delivery: .socket)
            #expect(device.acquisitions.value == ["AcquireNotify:char0024"])
            #expect(!device.calls.value.contains { $0.hasPrefix("StartNotify") })
            let end = try #require(device.socketEnds.value["AcquireNotify:char0024"])
            for value in 1...3 {
                let message: [UInt8] = [UInt8(value)]
                _ = message.withUnsafeBytes { send(end, $0.baseAddress, $0.count, 0) }
            }
            var iterator = stream.makeAsyncIterator()
            for value in 1...3 { #expect(try await iterator.next() == [UInt8(value)]) }
            close(end)
            let error = await #expect(throws: BluetoothError.self) { _ = try await iterator.next() }
            #expect(error?.code == .disconnected)
        }
    }
}

extension AcquiredSocketTests {
    @Test func manyNotificationsFromTheSocketArriveInOrder() async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = nil
            try await peripheral.connect(timeout: .safetyNet)
            let stream = try await peripheral.notifications(of: SeedCharacteristic.b2, delivery: .socket)
            let end = try #require(device.socketEnds.value["AcquireNotify:char0024"])
            let count = 20_000
            // Able reads the socket as fast as values come, into the stream's buffer of 16,384
            // (newest dropped when full): a sender more than that ahead of a slow consumer (under
            // ThreadSanitizer) would see values dropped, as documented. Keep within half of it.
            let taken = Locked(0)
            let sender = Task.detached {
                for value in 0..<count {
                    while value - taken.value >= 8_192 { try? await Task.sleep(for: .milliseconds(1)) }
                    let message: [UInt8] = [UInt8(value >> 8), UInt8(value & 0xFF), 0, 0, 0, 0, 0, 0]
                    while message.withUnsafeBytes({ send(end, $0.baseAddress, $0.count, 0) }) < 0 {}
                }
            }
            var received: [Int] = []
            for try await value in stream.prefix(count) {
                received.append(Int(value[0]) << 8 | Int(value[1]))
                taken.value = received.count
            }
            await sender.value
            #expect(received == (0..<count).map { $0 & 0xFFFF })
            #expect(stream.droppedCount == 0)
        }
    }
}

extension AcquiredSocketTests {
    @Test func aSocketClosedWithItsCharacteristicWhileConnectedEndsTheStreamNamingIt() async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = nil
            try await peripheral.connect(timeout: .safetyNet)
            let stream = try await peripheral.notifications(of: SeedCharacteristic.b2, delivery: .socket)
            let end = try #require(device.socketEnds.value["AcquireNotify:char0024"])
            // As BlueZ does when a Service Changed indication removes the characteristic: the
            // socket closes, then the object goes; the link stays up.
            close(end)
            let b2 = device.characteristicPath(1, 1)
            await device.connection.unexport(DBusObjectPath(rawValue: b2.rawValue + "/desc0025")!)
            await device.connection.unexport(b2)
            let error = await #expect(throws: BluetoothError.self) { for try await _ in stream {} }
            #expect(error?.code == .attributeRemoved, "\(String(describing: error))")
            #expect(error?.message.contains(SeedCharacteristic.b2.uuid.description) == true)
            #expect(await peripheral.isConnected)
        }
    }
}

extension AcquiredSocketTests {
    /// The socket's reader keeps its own copy of the streams and takes a new one when they change:
    /// a stream that joins gets every value sent after it subscribed, one that leaves no longer
    /// holds the others back, and all share the one socket.
    @Test func streamsThatJoinAndLeaveASocketGetTheValuesSentWhileTheyAreSubscribed() async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = nil
            try await peripheral.connect(timeout: .safetyNet)
            func send(_ value: UInt8) throws {
                let end = try #require(device.socketEnds.value["AcquireNotify:char0024"])
                _ = [value].withUnsafeBytes { Glibc.send(end, $0.baseAddress, $0.count, 0) }
            }
            let first = try await peripheral.notifications(of: SeedCharacteristic.b2, delivery: .socket)
            var firstValues = first.makeAsyncIterator()
            try send(1)
            #expect(try await firstValues.next() == [1])

            let second = try await peripheral.notifications(of: SeedCharacteristic.b2, delivery: .socket)
            var secondValues = second.makeAsyncIterator()
            try send(2)
            #expect(try await firstValues.next() == [2])
            #expect(try await secondValues.next() == [2], "a stream that joined missed the next value")

            // The first leaves: its task is cancelled while it waits.
            let leaving = Task { [first] in
                var values: [[UInt8]] = []
                for try await value in first { values.append(value) }
                return values
            }
            leaving.cancel()
            _ = try await leaving.value
            try send(3)
            #expect(try await secondValues.next() == [3])

            let third = try await peripheral.notifications(of: SeedCharacteristic.b2, delivery: .socket)
            var thirdValues = third.makeAsyncIterator()
            try send(4)
            #expect(try await secondValues.next() == [4])
            #expect(try await thirdValues.next() == [4], "a stream that joined got a value from before it")
            #expect(device.acquisitions.value == ["AcquireNotify:char0024"], "the streams did not share the socket")
        }
    }
}

extension AcquiredSocketTests {
    /// Able copies each value into the storage of the one before when no stream kept that one: a
    /// handler that keeps every value must still find each as it came, on the socket and on the bus.
    @Test(arguments: [NotificationDelivery.socket, .propertiesChanged])
    func valuesAHandlerKeepsStayAsTheyCame(delivery: NotificationDelivery) async throws {
        try await peripheralTests.withDevice { _, device, _, peripheral in
            device.acquireAnswer.value = nil
            try await peripheral.connect(timeout: .safetyNet)
            let stream = try await peripheral.notifications(of: SeedCharacteristic.b2, delivery: delivery)
            let sent: [[UInt8]] = (1...40).map { index in
                (0..<(index % 7 + 1)).map { UInt8(truncatingIfNeeded: index * 13 + $0) }
            }
            let kept = Locked<[[UInt8]]>([])
            // Every other value is kept; the rest are only looked at, so their storage is used again.
            let looked = Locked(0)
            let handler = Task {
                try await stream.forEach { value in
                    if value.first.map({ $0 % 2 == 0 }) ?? false {
                        kept.value.append(value)
                    } else {
                        looked.value += 1
                    }
                }
            }
            for (index, value) in sent.enumerated() {
                if delivery == .socket {
                    let end = try #require(device.socketEnds.value["AcquireNotify:char0024"])
                    _ = value.withUnsafeBytes { send(end, $0.baseAddress, $0.count, 0) }
                } else {
                    device.notify(1, 1, value)
                }
                // One at a time, as a link paces them: each alone in its wake-up.
                try await waitUntil { kept.value.count + looked.value == index + 1 }
            }
            handler.cancel()
            _ = try? await handler.value
            #expect(kept.value == sent.filter { $0[0] % 2 == 0 })
            #expect(looked.value == sent.filter { $0[0] % 2 != 0 }.count)
        }
    }
}
