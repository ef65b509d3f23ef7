import Testing

@testable import AbleBlueZ

/// The object tree's table of value receivers remembers the last path looked up; what it
/// remembers must never outlive a change of the table.
struct ValueReceiversTests {
    private static func receiver(_ id: UInt64) -> BlueZObjectTree.ValueReceiver {
        BlueZObjectTree.ValueReceiver(id: id, deliver: { _ in true }, connectionLost: { _ in })
    }

    private let first = "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001/char0002"
    private let second = "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001/char0004"

    @Test("A path with no receiver, looked up before one is added, finds the one added")
    func addedAfterAMiss() {
        var receivers = BlueZObjectTree.ValueReceivers()
        #expect(receivers.receiver(for: first) == nil)
        receivers[first] = Self.receiver(1)
        #expect(receivers.receiver(for: first)?.id == 1)
    }

    @Test("A receiver removed or replaced after a lookup is not found again")
    func removedOrReplacedAfterAHit() {
        var receivers = BlueZObjectTree.ValueReceivers()
        receivers[first] = Self.receiver(1)
        #expect(receivers.receiver(for: first)?.id == 1)
        receivers[first] = Self.receiver(2)
        #expect(receivers.receiver(for: first)?.id == 2)
        receivers[first] = nil
        #expect(receivers.receiver(for: first) == nil)
        #expect(receivers.byPath.isEmpty)
    }

    @Test("Lookups that alternate between paths find each path's own receiver")
    func alternatingPaths() {
        var receivers = BlueZObjectTree.ValueReceivers()
        receivers[first] = Self.receiver(1)
        receivers[second] = Self.receiver(2)
        for _ in 0..<3 {
            #expect(receivers.receiver(for: first)?.id == 1)
            #expect(receivers.receiver(for: first)?.id == 1)
            #expect(receivers.receiver(for: second)?.id == 2)
            // An equal path in another string is the same path.
            #expect(receivers.receiver(for: String(second.utf8.map { Character(UnicodeScalar($0)) }))?.id == 2)
        }
        #expect(receivers.receiver(for: "/org/bluez/hci0") == nil)
    }
}
