// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Able",
    products: [
        .library(name: "Able", targets: ["Able"]),
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
        .target(name: "AbleDBus", dependencies: ["CDBus"]),
        .target(name: "Able", dependencies: ["AbleDBus", "CBluetooth"]),
        .target(name: "AbleCommand", dependencies: ["Able", "AbleSimulator"]),
        .executableTarget(name: "able", dependencies: ["AbleCommand"]),
        .target(name: "AbleSimulator", dependencies: ["Able"]),
        .executableTarget(
            name: "AbleBenchmarks",
            dependencies: ["Able", "AbleDBus", "AbleSimulator"],
            path: "Benchmarks/AbleBenchmarks"
        ),
        .target(name: "AbleTestSupport", dependencies: ["AbleDBus"], path: "Tests/Support"),
        .target(name: "AbleScenarios", dependencies: ["Able"], path: "Tests/Scenarios"),
        .testTarget(name: "AbleDBusTests", dependencies: ["AbleDBus", "AbleTestSupport"]),
        .testTarget(name: "AbleTests", dependencies: ["Able", "AbleDBus", "AbleScenarios", "AbleTestSupport"]),
        .testTarget(
            name: "AbleCommandTests", dependencies: ["AbleCommand", "Able", "AbleSimulator", "AbleTestSupport"]),
        .testTarget(
            name: "AbleSimulatorTests", dependencies: ["Able", "AbleSimulator", "AbleScenarios", "AbleTestSupport"]),
        .testTarget(
            name: "RealBlueZTests", dependencies: ["Able", "AbleDBus", "AbleScenarios"], exclude: ["Fixtures"]),
    ],
    swiftLanguageModes: [.v6]
)
