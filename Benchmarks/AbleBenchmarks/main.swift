// The Swift half of `Scripts/bench`: each command does, through AbleDBus, what a C program in
// `Benchmarks/C` does through libdbus (`signals` is `signal-receiver.c`), and prints the same
// `result` line.
#if canImport(Glibc)
    import Glibc
#endif

let usage = """
    usage: AbleBenchmarks call-sequential ADDRESS N WARMUP global|shared
           AbleBenchmarks call-pipelined ADDRESS N WINDOW WARMUP global|shared
           AbleBenchmarks signals ADDRESS N BUFFER_LIMIT global|shared
    """

func integer(_ text: String) -> Int {
    guard let value = Int(text), value >= 0 else {
        print(usage)
        exit(2)
    }
    return value
}

func placement(_ text: String) -> Placement {
    guard let placement = Placement(rawValue: text) else {
        print(usage)
        exit(2)
    }
    return placement
}

let arguments = CommandLine.arguments.dropFirst()
do {
    let result: Measurement
    switch (arguments.first, arguments.count) {
    case ("call-sequential", 5):
        let a = Array(arguments)
        result = try await runSequentialCalls(
            address: a[1], count: integer(a[2]), warmup: integer(a[3]), placement: placement(a[4]))
    case ("call-pipelined", 6):
        let a = Array(arguments)
        result = try await runPipelinedCalls(
            address: a[1], count: integer(a[2]), window: integer(a[3]), warmup: integer(a[4]),
            placement: placement(a[5]))
    case ("signals", 5):
        let a = Array(arguments)
        result = try await runSignals(
            address: a[1], count: integer(a[2]), bufferLimit: integer(a[3]), placement: placement(a[4]))
    default:
        print(usage)
        exit(2)
    }
    result.report()
} catch {
    var standardError = StandardError()
    print("AbleBenchmarks: \(error)", to: &standardError)
    exit(1)
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        var text = string
        text.withUTF8 { buffer in _ = Glibc.write(2, buffer.baseAddress, buffer.count) }
    }
}
