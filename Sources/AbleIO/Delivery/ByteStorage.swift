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
    /// The last recycled array, whose storage the next array may take; an optional, so that
    /// taking it out and putting the next one back release nothing.
    private var spare: [UInt8]?

    package init() {}

    /// An array of these bytes: in the storage kept, if it has room and is not much larger, else
    /// a new one.
    ///
    /// A value as long as the last one (a stream whose values have one length) is written over
    /// the last one's bytes; one of another length empties the storage first, which costs the
    /// array's generic resizing.
    package mutating func array(of bytes: UnsafeRawBufferPointer) -> [UInt8] {
        guard let capacity = spare?.capacity, capacity >= bytes.count, capacity <= 2 * bytes.count + 64,
            var value = spare.take()
        else {
            return Self.newArray(of: bytes)
        }
        if value.count == bytes.count {
            // Copied first if someone holds it still: arrays are values.
            value.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        } else {
            value.removeAll(keepingCapacity: true)
            value.append(contentsOf: bytes.assumingMemoryBound(to: UInt8.self))
        }
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
    /// holds it, its storage takes the next array that fits. If someone does, the next array
    /// that fits copies it first (arrays are values) and leaves the holder's array alone: an
    /// allocation made then, as it would have been anyway.
    package mutating func recycle(_ value: consuming [UInt8]) {
        spare = value
    }
}
