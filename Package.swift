// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Able",
    products: [
        .library(name: "Able", targets: ["Able"]),
        .library(name: "AbleDBus", targets: ["AbleDBus"]),
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
        .executableTarget(
            name: "AbleBenchmarks",
            dependencies: ["Able", "AbleDBus"],
            path: "Benchmarks/AbleBenchmarks"
        ),
        .target(name: "AbleTestSupport", dependencies: ["AbleDBus"], path: "Tests/Support"),
        .testTarget(name: "AbleDBusTests", dependencies: ["AbleDBus", "AbleTestSupport"]),
        .testTarget(name: "AbleTests", dependencies: ["Able", "AbleDBus", "AbleTestSupport"]),
        .testTarget(name: "RealBlueZTests", dependencies: ["Able", "AbleDBus"], exclude: ["Fixtures"]),
    ],
    swiftLanguageModes: [.v6]
)
