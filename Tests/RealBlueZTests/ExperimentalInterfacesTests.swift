import Able
import AbleBlueZ
import AbleScenarios
import Testing

extension RealBlueZ {
    /// What BlueZ offers only with its experimental interfaces (`bluetoothd -E`): passive scanning
    /// through `AdvertisementMonitorManager1` on both versions, and scan response data from 5.80.
    ///
    /// The rest of the tier runs the guest's `bluetoothd` without `-E`, as distributions ship it,
    /// and there these features are refused with an error naming `-E` (the scenarios check that).
    /// This suite restarts `bluetoothd` with `-E` for its tests and without it afterwards.
    @Suite(.timeLimit(.minutes(4)))
    struct ExperimentalInterfaces {
        @Test func passiveScanningThroughTheAdvertisementMonitorFindsTheMatchingAdvertiser() async throws {
            try await withExperimentalInterfaces {
                try await withRig { rig in
                    try await AdvertisingScenario.passiveScanning.run(
                        on: BlueZScenarioBackend(rig: rig), requiringSupport: true)
                }
            }
        }

        @Test func scanResponseDataReachesTheScanner() async throws {
            let version = try #require(Guest.bluezVersion)
            try await withExperimentalInterfaces {
                try await withRig { rig in
                    // BlueZ reads scan response fields (`ScanResponse*`) from 5.80, and only
                    // with -E; 5.66 has no such properties, so Able refuses them there.
                    try await AdvertisingScenario.scanResponseData.run(
                        on: BlueZScenarioBackend(rig: rig), requiringSupport: version >= BlueZVersion(5, 80))
                }
            }
        }

        /// Restarts `bluetoothd` with `-E`, runs `body`, and restarts it as the run started it.
        private func withExperimentalInterfaces(_ body: () async throws -> Void) async throws {
            try #require(await Guest.restartBluetoothd(with: "-E") == 0, "restart-bluetoothd --with -E failed")
            try await withCleanup {
                try await body()
            } cleanup: {
                let status = try? await Guest.restartBluetoothd()
                #expect(status == 0, "restart-bluetoothd failed")
            }
        }
    }
}
