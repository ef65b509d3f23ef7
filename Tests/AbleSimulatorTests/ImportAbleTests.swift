import Able
import Testing

/// What a user's file that says only `import Able` sees: the whole public API of AbleCore,
/// re-exported, and the system's adapters, which the `Able` module provides on BlueZ.
struct ImportAbleTests {
    @Test("import Able alone gives the system's adapters and the public types")
    func importAbleGivesEverything() async {
        // The system entry points compile here (no BlueZ runs on the host, so only `named(_:)`'s
        // own check is called).
        _ = (Adapter.default, Adapter.named, Adapter.all, Adapter.events)
        // A name no adapter can have is refused by the `Able` module before BlueZ is asked.
        let error = await #expect(throws: BluetoothError.self) { try await Adapter.named("") }
        #expect(error?.code == .invalidArguments)
        #expect(PSM(rawValue: 0x0080).rawValue == 0x0080)
    }
}
