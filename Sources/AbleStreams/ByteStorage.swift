/// Storage for the byte arrays a producer makes one after the other (received values), used
/// again for the next array once nobody holds the last one.
///
/// A value that its takers only looked at (a stream's handler read it) is handed back with
/// ``recycle(_:)``; if nobody kept it, the next ``array(of:)`` that fits copies into the same
/// storage, so a paced value costs no allocation and no free. An array someone kept is never
/// written to: Swift's arrays are values, and the storage is reused only when it is unique.
///
/// An array is made in the storage kept only if that storage is at most twice its size, plus 64
/// bytes: a consumer that keeps many small values (a stream's buffer) does not keep a large
/// storage with each of them.
///
/// Not thread-safe: a value type, kept by the one producer that uses it.
package struct ByteStorage {
    /// Empty storage the last recycled array left behind.
    private var spare: [UInt8] = []

    package init() {}

    /// An array of these bytes: in the storage kept, if it has room and is not much larger, else
    /// a new one.
    package mutating func array(of bytes: UnsafeRawBufferPointer) -> [UInt8] {
        guard spare.capacity >= bytes.count, spare.capacity <= 2 * bytes.count + 64 else {
            return Self.newArray(of: bytes)
        }
        var value: [UInt8] = []
        swap(&value, &spare)
        value.append(contentsOf: bytes.assumingMemoryBound(to: UInt8.self))
        return value
    }

    /// A new array of exactly these bytes.
    ///
    /// Not `[UInt8](unsafeUninitializedCapacity:initializingWith:)`: that looks up the array
    /// storage's generic metadata on every call (a 20-byte copy took 64 ns that way against 38 ns
    /// this way, measured apart).
    private static func newArray(of bytes: UnsafeRawBufferPointer) -> [UInt8] {
        Array(bytes)
    }

    /// Takes back an array ``array(of:)`` made, once its takers are done with it. If nobody else
    /// holds it, its storage takes the next array that fits. If someone does, emptying it while
    /// keeping its capacity makes a new storage of that capacity and leaves the holder's array
    /// alone: an allocation made now instead of for the next array.
    package mutating func recycle(_ value: consuming [UInt8]) {
        var value = value
        value.removeAll(keepingCapacity: true)
        spare = value
    }
}
