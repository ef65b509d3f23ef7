import Foundation
import Testing

/// The core module and the simulator speak ``Able/BluetoothError`` codes: BlueZ's error names and
/// BlueZ-named API belong to the BlueZ backend (AbleBlueZ). These tests read the two modules'
/// sources, so that code that builds or parses a BlueZ name there, or a declaration named after
/// BlueZ, fails here; comments may still say what BlueZ does, and messages may name it.
struct BackendNeutralityTests {
    /// The package's root, from this file's place in `Tests/AbleTests`.
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The code of a module's Swift files, line by line, without comments and string literals'
    /// contents when `strippingStrings` is set; each line is prefixed with its file and number.
    private static func codeLines(of module: String, strippingStrings: Bool) throws -> [(place: String, code: String)] {
        let directory = root.appendingPathComponent("Sources/\(module)")
        let files = try #require(FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        #expect(!files.isEmpty, "no Swift files in \(directory.path)")
        let literal = try Regex(#""(?:\\.|[^"\\])*""#)
        var lines: [(String, String)] = []
        for file in files {
            for (index, line) in try String(contentsOf: file, encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false
            ).enumerated() {
                var code = String(line)
                if strippingStrings { code = code.replacing(literal, with: "\"\"") }
                if let comment = code.firstRange(of: "//") { code = String(code[..<comment.lowerBound]) }
                lines.append(("\(module)/\(file.lastPathComponent):\(index + 1)", code))
            }
        }
        return lines
    }

    @Test("The core and the simulator build and parse no org.bluez name", arguments: ["AbleCore", "AbleSimulator"])
    func noBlueZNames(module: String) throws {
        for (place, code) in try Self.codeLines(of: module, strippingStrings: false)
        where code.lowercased().contains("org.bluez") {
            Issue.record("\(place) names BlueZ outside a comment: \(code)")
        }
    }

    @Test("No declaration of the core or the simulator is named after BlueZ", arguments: ["AbleCore", "AbleSimulator"])
    func noBlueZDeclarations(module: String) throws {
        for (place, code) in try Self.codeLines(of: module, strippingStrings: true)
        where code.lowercased().contains("bluez") {
            Issue.record("\(place) has a BlueZ-named identifier: \(code)")
        }
    }
}
