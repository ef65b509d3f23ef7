import Testing

@testable import AbleIO

/// `ByteStorage`: an array handed back with nobody else holding it lends its storage to the next
/// that fits; one someone kept is never written to.
struct ByteStorageTests {
    static func address(of array: [UInt8]) -> UnsafeRawPointer? {
        array.withUnsafeBytes { $0.baseAddress }
    }

    static func array(_ bytes: [UInt8], in storage: inout ByteStorage) -> [UInt8] {
        bytes.withUnsafeBytes { storage.array(of: $0) }
    }

    @Test func anArrayNobodyKeptLendsItsStorageToTheNext() {
        var storage = ByteStorage()
        var first: [UInt8]? = Self.array([1, 2, 3, 4], in: &storage)
        let firstAddress = first.map(Self.address(of:))
        #expect(first == [1, 2, 3, 4])
        storage.recycle(first.take()!)
        let second = Self.array([5, 6], in: &storage)
        #expect(second == [5, 6])
        #expect(Self.address(of: second) == firstAddress)
    }

    @Test func aValueAsLongAsTheLastIsWrittenOverItInItsStorage() {
        var storage = ByteStorage()
        var first: [UInt8]? = Self.array([1, 2, 3], in: &storage)
        let firstAddress = first.map(Self.address(of:))
        storage.recycle(first.take()!)
        var second: [UInt8]? = Self.array([4, 5, 6], in: &storage)
        #expect(second == [4, 5, 6])
        #expect(second.map(Self.address(of:)) == firstAddress)
        storage.recycle(second.take()!)
        // And again after one of another length: each one's bytes, never the last one's.
        var longer: [UInt8]? = Self.array([7, 8, 9, 10], in: &storage)
        #expect(longer == [7, 8, 9, 10])
        storage.recycle(longer.take()!)
        #expect(Self.array([11, 12, 13, 14], in: &storage) == [11, 12, 13, 14])
    }

    @Test func anArraySomeoneKeptIsNeverWrittenTo() {
        var storage = ByteStorage()
        var first: [UInt8]? = Self.array([1, 2, 3], in: &storage)
        let kept = first!
        storage.recycle(first.take()!)
        let second = Self.array([9, 9, 9], in: &storage)
        #expect(kept == [1, 2, 3])
        #expect(second == [9, 9, 9])
        #expect(Self.address(of: second) != Self.address(of: kept))
    }

    @Test func anArrayLargerThanTheStorageKeptGetsNewStorageAndAMuchSmallerOneToo() {
        var storage = ByteStorage()
        var small: [UInt8]? = Self.array([1], in: &storage)
        storage.recycle(small.take()!)
        let bytes = (0..<200).map { UInt8($0) }
        var large: [UInt8]? = Self.array(bytes, in: &storage)
        #expect(large == bytes)
        let largeAddress = large.map(Self.address(of:))
        storage.recycle(large.take()!)
        // A value near the large one's size goes in its storage.
        let near = (0..<150).map { UInt8($0 &+ 1) }
        var nearArray: [UInt8]? = Self.array(near, in: &storage)
        #expect(nearArray == near)
        #expect(nearArray.map(Self.address(of:)) == largeAddress)
        storage.recycle(nearArray.take()!)
        // A much smaller one does not: kept, it would keep all of that storage.
        let short = Self.array([7, 8], in: &storage)
        #expect(short == [7, 8])
        #expect(Self.address(of: short) != largeAddress)
        #expect(short.capacity <= 2 * 2 + 64)
        #expect(Self.array([], in: &storage) == [])
    }
}
