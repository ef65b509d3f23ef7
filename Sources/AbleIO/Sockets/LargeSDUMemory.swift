import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Keeps glibc's malloc from giving the pages of freed large SDUs back to the kernel between SDUs.
///
/// Each large SDU is an array of its own (the consumer owns it, so its memory cannot be reused
/// by the channel). When the consumer frees a run of them, glibc merges them into the top of
/// the arena and, once that top is over its trim threshold (128 KiB by default), returns the
/// pages to the kernel (`MADV_DONTNEED`); the next SDUs fault them in again, zeroed. At 64 KiB
/// SDUs that costs a third of the time of receiving them.
///
/// glibc raises its thresholds by itself when a program frees a block it had mapped with
/// `mmap` (one over the mmap threshold): the mmap threshold becomes that block's size and the
/// trim threshold twice that (see `mallopt(3)`, `M_MMAP_THRESHOLD`). Able does that once per
/// process, with a block of ``blockSize``, when it first opens a channel with a receive MTU
/// over ``minimumReceiveMTU``: each arena then keeps up to 2 MiB of freed memory rather than
/// 128 KiB, and blocks up to 1 MiB come from the heap rather than `mmap`. Unlike setting the
/// thresholds with `mallopt`, this keeps glibc adjusting them, and it never lowers them.
package enum LargeSDUMemory {
    /// The receive MTU above which a channel raises the thresholds.
    package static let minimumReceiveMTU = 16 * 1024

    /// The block whose release raises the thresholds: 1 MiB.
    package static let blockSize = 1 << 20

    /// Raises glibc's thresholds, once per process, if `receiveMTU` is large.
    package static func prepare(receiveMTU: Int) {
        guard receiveMTU > minimumReceiveMTU else { return }
        _ = raised
    }

    /// Where the block's address goes, so that the compiler keeps the allocation.
    private static let lastBlock = Atomic<Int>(0)

    private static let raised: Bool = {
        #if canImport(Glibc)
            guard let block = malloc(blockSize) else { return false }
            block.storeBytes(of: 0, as: UInt8.self)
            lastBlock.store(Int(bitPattern: block), ordering: .relaxed)
            free(block)
            return true
        #else
            return false
        #endif
    }()
}
