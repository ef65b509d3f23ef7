import Testing

/// The real-BlueZ tier, run by `Scripts/bluez-vm/run-tests` in a QEMU guest (see Tests/README.md).
///
/// Its suites share the guest's two controllers and its one `bluetoothd`, so they run one test
/// at a time; everywhere else they are skipped.
@Suite(.onlyInTheBlueZGuest, .serialized)
struct RealBlueZ {}
