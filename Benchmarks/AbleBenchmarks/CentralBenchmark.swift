import Able
import AbleBlueZ
import AbleDBus
import AbleIO
import Synchronization

/// What `Benchmarks/C/fake-bluez.c` exports: an adapter, a connected peripheral, one of its
/// services and a characteristic that notifies (the names are in `bench-common.h`).
enum FakeBlueZShape {
    static let adapter = "hci0"
    static let peripheral: BluetoothAddress = "00:AA:01:01:00:01"
    static let service = BluetoothUUID("ab1e0001-5a3c-4c8e-9d1f-7b2e4c6a8d00")
    static let characteristic = BluetoothUUID("ab1e0002-5a3c-4c8e-9d1f-7b2e4c6a8d00")
    static let characteristicID = CharacteristicID(characteristic, service: service)
    static let valueLength = 20

    /// The sequence number in the first 8 bytes of a notified value (little-endian).
    static func sequenceNumber(of value: [UInt8]) throws -> UInt64 {
        guard value.count == valueLength else {
            throw BenchmarkFailure("a notification of \(value.count) bytes, not \(valueLength)")
        }
        return value.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
    }
}

/// The user's `for try await` loop over a notification stream, in a task on the global executor
/// (what a `nonisolated` async function gets).
nonisolated func receiveNotifications(_ stream: NotificationStream, count: Int, progress: Progress) async throws
    -> SequenceCheck
{
    try await receiveNumbered(stream, count: count, progress: progress, sequenceNumber: FakeBlueZShape.sequenceNumber)
}

/// The user's handler (`NotificationStream.forEach(_:)`), which Able calls on its event loop with
/// each value, checking their sequence numbers until `count` have been expected; then the task
/// that runs it is cancelled, which ends the stream.
nonisolated func receiveNotificationsInHandler(_ stream: NotificationStream, count: Int, progress: Progress)
    async throws -> SequenceCheck
{
    let check = SharedSequenceCheck(count: count, progress: progress)
    let reached = AsyncStream<Void>.makeStream()
    let consumer = Task {
        try await stream.forEach { value in
            if check.note(try? FakeBlueZShape.sequenceNumber(of: value)) { reached.continuation.finish() }
        }
    }
    // Also ends when this task is cancelled (the watchdog's doing).
    for await _ in reached.stream {}
    consumer.cancel()
    try await consumer.value
    return check.result
}

/// Where `central-notifications` and `central-notify-socket` take the values.
enum NotificationConsumer {
    /// A `for try await` loop in a task on the global executor: what a `nonisolated` async
    /// function of the user's gets.
    case task
    /// The same loop in a task that prefers the event loop the values come from, so that a value
    /// wakes no other thread (not offered by the public API; for information).
    case taskOnLoop
    /// `NotificationStream.forEach(_:)`: the user's handler on Able's event loop, no task per value.
    case handler
}

/// `central-notifications`: through Able's public API on the fake BlueZ, gets the adapter and the
/// peripheral, connects, and takes `count` values from `notifications(of:)` (whose `StartNotify`
/// makes the fake emit them), checking their sequence numbers. Gives up after 5 s without a value
/// (30 s before the first). The CPU time counts from just before subscribing.
///
/// `consumer` says where the values are taken (see ``NotificationConsumer``).
///
/// With `delivery: .socket` it is `central-notify-socket`: the values come through the
/// characteristic's own socket, which the fake answers `AcquireNotify` with and then writes them
/// into (what `socket-client.c … notify` does with `read(2)`).
func runCentralNotifications(
    address: String, count: Int, delivery: NotificationDelivery = .propertiesChanged,
    consumer: NotificationConsumer = .task
) async throws -> Measurement {
    let connection = try await DBusConnection.connect(to: .address(address))
    let adapter = try await Adapter.bluez(named: FakeBlueZShape.adapter, on: connection)
    let peripheral = adapter.peripheral(address: FakeBlueZShape.peripheral)
    try await peripheral.connect(timeout: .seconds(10))
    let progress = Progress()
    let start = Mark.now()
    let stream = try await peripheral.notifications(of: FakeBlueZShape.characteristicID, delivery: delivery)
    let loop: any TaskExecutor = delivery == .socket ? EventLoop.sockets : connection.executor
    let receiving =
        switch consumer {
        case .task: Task.detached { try await receiveNotifications(stream, count: count, progress: progress) }
        case .taskOnLoop:
            Task.detached(executorPreference: loop) {
                try await receiveNotifications(stream, count: count, progress: progress)
            }
        case .handler:
            Task.detached { try await receiveNotificationsInHandler(stream, count: count, progress: progress) }
        }
    let watchdog = startWatchdog(cancelling: receiving, progress: progress)
    let check = try await receiving.value
    let end = Mark.now()
    watchdog.cancel()
    let dropped = stream.droppedCount
    await connection.close()
    return check.measurement(expecting: count, start: start, end: end, dropped: dropped)
}

/// How `central-write-socket` writes.
enum SocketWriteStyle: String {
    /// `Peripheral.write(_:to:type: .withoutResponse)` once per value, from a task on the global
    /// executor: what an application writing as values come does.
    case single
    /// `Peripheral.writeWithoutResponse(_:to:)` with every value, as a firmware update does.
    case sequence
}

/// `central-write-socket`: `count` writes without response of 20 bytes (the sequence number
/// first) through the characteristic's `AcquireWrite` socket, which the fake drains and checks:
/// what `socket-client.c … write` does with blocking `write(2)`. The CPU counts from just before
/// the first write (which acquires the socket) to the last write's return.
func runCentralWriteSocket(address: String, count: Int, style: SocketWriteStyle) async throws -> Measurement {
    let connection = try await DBusConnection.connect(to: .address(address))
    let adapter = try await Adapter.bluez(named: FakeBlueZShape.adapter, on: connection)
    let peripheral = adapter.peripheral(address: FakeBlueZShape.peripheral)
    try await peripheral.connect(timeout: .seconds(10))
    let values = (0..<count).map { index in
        (0..<FakeBlueZShape.valueLength).map { byte in
            byte < 8 ? UInt8(truncatingIfNeeded: UInt64(index) >> (8 * byte)) : UInt8(byte)
        }
    }
    let start = Mark.now()
    try await Task.detached {
        switch style {
        case .single:
            for value in values {
                try await peripheral.write(value, to: FakeBlueZShape.characteristicID, type: .withoutResponse)
            }
        case .sequence:
            try await peripheral.writeWithoutResponse(values, to: FakeBlueZShape.characteristicID)
        }
    }.value
    let end = Mark.now()
    // Let the fake read what the socket holds before the link is released.
    try await peripheral.disconnect()
    await connection.close()
    return Measurement(operations: count, wall: end.wall - start.wall, start: start, end: end)
}
