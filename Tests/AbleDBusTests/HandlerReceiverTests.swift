import AbleDBus
import AbleIO
import Testing

/// A subscription's handler lives as long as the subscription: months, in a gateway.
struct HandlerReceiverTests {
    /// Every signal checks that the subscription has not ended. When that check wrapped the end
    /// handler in one more thunk each time (a debug build reabstracting a closure stored bare in a
    /// `Lock`), each signal leaked 96 bytes, and ending the subscription called through every
    /// thunk and overflowed the stack: this test then crashes.
    @Test func aHandlerThatReceivedManySignalsStillEnds() {
        let received = Lock(0)
        let ended = Lock(0)
        let receiver = HandlerReceiver(
            handler: .decoded { _ in received.withLock { $0 += 1 } }, onEnd: { _ in ended.withLock { $0 += 1 } })
        let signal = DBusSignal(
            sender: ":1.7", path: "/org/bluez/hci0", interface: "org.example.Test", member: "Tick",
            arguments: [])
        for _ in 0..<300_000 { receiver.yield(signal) }
        receiver.finish(throwing: nil)
        receiver.yield(signal)
        receiver.finish(throwing: nil)
        #expect(received.withLock { $0 } == 300_000)
        #expect(ended.withLock { $0 } == 1)
    }
}
