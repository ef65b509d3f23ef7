// Linked into every fuzz target (a symlink in each target's folder).
//
// SwiftPM links an executable target with its entry point renamed to `<Target>_main`, so the
// fuzzer cannot use libFuzzer's own `main`: each target defines `<Target>_main` and hands
// libFuzzer its `LLVMFuzzerTestOneInput` through `LLVMFuzzerRunDriver`.

@_silgen_name("LLVMFuzzerRunDriver")
private func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// Runs libFuzzer with the program's arguments and `testOneInput`.
func runFuzzer(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt {
    var argc = argc
    var argv = argv
    return llvmFuzzerRunDriver(&argc, &argv, testOneInput)
}

/// The input as an array (libFuzzer passes a null pointer for the empty input).
func fuzzInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// Reads a fuzzer's input as a sequence of choices.
struct FuzzReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint16() -> UInt16 { UInt16(byte()) | UInt16(byte()) << 8 }

    mutating func uint32() -> UInt32 { UInt32(uint16()) | UInt32(uint16()) << 16 }

    /// Up to `count` bytes (fewer at the end).
    mutating func bytes(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, offset + max(0, count))
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    /// A length-prefixed chunk: one byte of length, then that many bytes.
    mutating func chunk() -> [UInt8] { bytes(Int(byte())) }

    /// A length-prefixed string (any bytes, repaired to UTF-8).
    mutating func string() -> String { String(decoding: chunk(), as: UTF8.self) }

    /// Everything left.
    mutating func rest() -> [UInt8] { bytes(bytes.count - offset) }
}
