// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "Able",
    products: [
        // Users import Able: the public API (AbleCore, re-exported) with the system's adapters on BlueZ.
        .library(name: "Able", targets: ["Able"]),
        .library(name: "AbleDBus", targets: ["AbleDBus"]),
        .executable(name: "able", targets: ["able"]),
        .library(name: "AbleSimulator", targets: ["AbleSimulator"]),
        // The `.simulatedRadio` Swift Testing trait: a module of its own, because importing Testing
        // makes it a load-time dependency, and `able` and the soak tool link AbleSimulator.
        .library(name: "AbleSimulatorTesting", targets: ["AbleSimulatorTesting"]),
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
        // The layers, bottom up: AbleIO (the epoll event loop, the delivery buffers and lock, the
        // socket engine, the kernel's L2CAP socket set-up), AbleDBus, AbleCore (the public API and
        // the backend seam; no C), the backends AbleBlueZ and AbleSimulator, and Able (AbleCore
        // re-exported, with the system's adapters on BlueZ).
        .target(name: "AbleIO", dependencies: ["CLinux", "CBluetooth"]),
        .target(name: "AbleDBus", dependencies: ["AbleIO", "CDBus", "CLinux"]),
        .target(name: "AbleCore", dependencies: ["AbleIO"]),
        .target(name: "AbleBlueZ", dependencies: ["AbleCore", "AbleDBus", "AbleIO"]),
        .target(name: "AbleSimulator", dependencies: ["AbleCore", "AbleIO"]),
        .target(name: "AbleSimulatorTesting", dependencies: ["AbleSimulator"]),
        .target(name: "Able", dependencies: ["AbleCore", "AbleBlueZ"]),
        .target(name: "AbleCommand", dependencies: ["Able", "AbleBlueZ", "AbleSimulator", "AbleIO", "CLinux"]),
        .executableTarget(name: "able", dependencies: ["AbleCommand"]),
        // The soak's two sides (Scripts/soak): a test tool, kept out of `able` and out of the
        // products; `swift build` builds it, and `swift build --product able-soak` alone.
        .target(name: "AbleSoak", dependencies: ["Able", "AbleCommand", "AbleIO", "CLinux"]),
        .executableTarget(name: "able-soak", dependencies: ["AbleSoak"]),
        .executableTarget(
            name: "AbleBenchmarks",
            dependencies: ["Able", "AbleBlueZ", "AbleDBus", "AbleSimulator", "AbleIO"],
            path: "Benchmarks/AbleBenchmarks"
        ),
        .target(name: "AbleTestSupport", dependencies: ["AbleDBus", "AbleIO"], path: "Tests/Support"),
        .target(name: "AbleScenarios", dependencies: ["AbleCore", "AbleIO"], path: "Tests/Scenarios"),
        .testTarget(name: "AbleDBusTests", dependencies: ["AbleDBus", "AbleIO", "AbleTestSupport", "CDBus"]),
        .testTarget(name: "AbleIOTests", dependencies: ["AbleIO", "AbleTestSupport"]),
        .testTarget(name: "AbleCoreTests", dependencies: ["AbleCore", "AbleIO", "AbleTestSupport"]),
        .testTarget(
            name: "AbleBlueZTests",
            dependencies: [
                "Able", "AbleCore", "AbleBlueZ", "AbleDBus", "AbleIO", "CBluetooth", "AbleScenarios", "AbleSimulator",
                "AbleTestSupport",
            ]),
        .testTarget(
            name: "AbleCommandTests",
            dependencies: ["AbleCommand", "Able", "AbleSimulator", "AbleIO", "AbleTestSupport"]),
        .testTarget(name: "AbleSoakTests", dependencies: ["AbleSoak", "AbleCommand", "Able", "AbleTestSupport"]),
        .testTarget(
            name: "AbleSimulatorTests",
            dependencies: ["Able", "AbleSimulator", "AbleSimulatorTesting", "AbleScenarios", "AbleTestSupport"]),
        .testTarget(
            name: "RealBlueZTests",
            dependencies: ["Able", "AbleCore", "AbleBlueZ", "AbleDBus", "AbleScenarios", "AbleIO"],
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
        ("FuzzObjectTree", ["AbleCore", "AbleBlueZ", "AbleDBus", "CDBus"]),
        ("FuzzValues", ["AbleCore", "AbleBlueZ", "AbleDBus"]),
        ("FuzzL2CAP", ["AbleCore", "AbleBlueZ", "AbleIO"]),
        ("FuzzExports", ["AbleCore", "AbleBlueZ", "AbleDBus", "AbleIO", "CDBus"]),
        ("FuzzGATTDatabase", ["AbleCore", "AbleBlueZ", "AbleDBus", "CDBus"]),
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
