// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "Able",
    products: [
        // Users import Able; the product brings the BlueZ backend that Adapter.default() finds.
        .library(name: "Able", targets: ["Able", "AbleBlueZ"]),
        .library(name: "AbleDBus", targets: ["AbleDBus"]),
        .executable(name: "able", targets: ["able"]),
        .library(name: "AbleSimulator", targets: ["AbleSimulator"]),
    ],
    targets: [
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        .systemLibrary(
            name: "CBluetooth",
            pkgConfig: "bluez",
            providers: [.apt(["libbluetooth-dev"])]
        ),
        // Linux and glibc headers the Glibc module leaves out: epoll and eventfd for the event
        // loops, <malloc.h> for the soak's heap figures (part of libc: nothing to install).
        .systemLibrary(name: "CLinux"),
        .target(name: "AbleStreams", dependencies: ["CLinux"]),
        .target(name: "AbleDBus", dependencies: ["AbleStreams", "CDBus", "CLinux"]),
        .target(name: "Able", dependencies: ["AbleStreams", "CLinux"]),
        .target(name: "AbleBlueZ", dependencies: ["Able", "AbleDBus", "AbleStreams", "CBluetooth"]),
        .target(name: "AbleSimulator", dependencies: ["Able", "AbleStreams"]),
        .target(name: "AbleCommand", dependencies: ["Able", "AbleBlueZ", "AbleSimulator", "AbleStreams"]),
        .executableTarget(name: "able", dependencies: ["AbleCommand"]),
        // The soak's two sides (Scripts/soak): a test tool, kept out of `able` and out of the
        // products; `swift build` builds it, and `swift build --product able-soak` alone.
        .target(name: "AbleSoak", dependencies: ["Able", "AbleCommand", "AbleStreams", "CLinux"]),
        .executableTarget(name: "able-soak", dependencies: ["AbleSoak"]),
        .executableTarget(
            name: "AbleBenchmarks",
            dependencies: ["Able", "AbleBlueZ", "AbleDBus", "AbleSimulator", "AbleStreams"],
            path: "Benchmarks/AbleBenchmarks"
        ),
        .target(name: "AbleTestSupport", dependencies: ["AbleDBus", "AbleStreams"], path: "Tests/Support"),
        .target(name: "AbleScenarios", dependencies: ["Able", "AbleStreams"], path: "Tests/Scenarios"),
        .testTarget(name: "AbleDBusTests", dependencies: ["AbleDBus", "AbleStreams", "AbleTestSupport", "CDBus"]),
        .testTarget(name: "AbleStreamsTests", dependencies: ["AbleStreams", "AbleTestSupport"]),
        .testTarget(name: "AbleTests", dependencies: ["Able", "AbleStreams", "AbleTestSupport"]),
        .testTarget(
            name: "AbleBlueZTests",
            dependencies: [
                "Able", "AbleBlueZ", "AbleDBus", "AbleStreams", "CBluetooth", "AbleScenarios", "AbleSimulator",
                "AbleTestSupport",
            ]),
        .testTarget(
            name: "AbleCommandTests",
            dependencies: ["AbleCommand", "Able", "AbleSimulator", "AbleStreams", "AbleTestSupport"]),
        .testTarget(name: "AbleSoakTests", dependencies: ["AbleSoak", "AbleCommand", "Able", "AbleTestSupport"]),
        .testTarget(
            name: "AbleSimulatorTests", dependencies: ["Able", "AbleSimulator", "AbleScenarios", "AbleTestSupport"]),
        .testTarget(
            name: "RealBlueZTests", dependencies: ["Able", "AbleBlueZ", "AbleDBus", "AbleScenarios", "AbleStreams"],
            exclude: ["Fixtures"]),
    ],
    swiftLanguageModes: [.v6]
)

// Imports are internal unless a file says otherwise, so that no C module leaks into a public
// signature, and a file must import every module whose members it uses.
for target in package.targets where target.type != .system {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("InternalImportsByDefault"),
            .enableUpcomingFeature("MemberImportVisibility"),
        ]
}

// Fuzz targets (Scripts/fuzz): declared only when ABLE_FUZZ is set, so that `swift build` and
// `swift test` never see them. Scripts/fuzz builds them in their own scratch directory with every
// Swift target instrumented for libFuzzer and AddressSanitizer.
if Context.environment["ABLE_FUZZ"] != nil {
    let fuzzFlags: [SwiftSetting] = [.unsafeFlags(["-sanitize=fuzzer,address"])]
    for target in package.targets where target.type != .system {
        target.swiftSettings = (target.swiftSettings ?? []) + fuzzFlags
    }
    let fuzzers: [(name: String, dependencies: [Target.Dependency])] = [
        ("FuzzDBusMessage", ["AbleDBus", "CDBus"]),
        ("FuzzObjectTree", ["Able", "AbleBlueZ", "AbleDBus", "CDBus"]),
        ("FuzzValues", ["Able", "AbleBlueZ"]),
        ("FuzzL2CAP", ["Able", "AbleBlueZ"]),
    ]
    for fuzzer in fuzzers {
        package.targets.append(
            .executableTarget(
                name: fuzzer.name, dependencies: fuzzer.dependencies, path: "Fuzz/\(fuzzer.name)",
                swiftSettings: [
                    .unsafeFlags(["-sanitize=fuzzer,address", "-parse-as-library"]),
                    .enableUpcomingFeature("InternalImportsByDefault"),
                    .enableUpcomingFeature("MemberImportVisibility"),
                ],
                linkerSettings: [.unsafeFlags(["-sanitize=fuzzer,address", "-use-ld=lld"])]))
    }
}
