import Able
import AbleSimulator
import Testing

@testable import AbleBlueZ

/// The simulator raises ``BluetoothError`` codes directly; these tests hold them to what the BlueZ
/// backend makes of BlueZ's replies in the same situations, so that code tested on the simulator
/// meets the same codes and ATT errors on a real adapter.
struct SimulatorErrorParityTests {
    /// What BlueZ's GATT client replies when a server answers with `error`
    /// (`create_gatt_dbus_error` in BlueZ's `src/gatt-client.c`, 5.66 and 5.82 alike).
    private static func bluezReply(to error: ATTError) -> (name: String, message: String) {
        switch error {
        case .readNotPermitted: ("org.bluez.Error.NotPermitted", "Read not permitted")
        case .writeNotPermitted: ("org.bluez.Error.NotPermitted", "Write not permitted")
        case .insufficientAuthentication, .insufficientEncryption, .insufficientEncryptionKeySize:
            ("org.bluez.Error.NotPermitted", "Not paired")
        case .invalidOffset: ("org.bluez.Error.InvalidArguments", "Invalid offset")
        case .invalidAttributeValueLength: ("org.bluez.Error.InvalidArguments", "Invalid Length")
        case .insufficientAuthorization: ("org.bluez.Error.NotAuthorized", "Operation Not Authorized")
        case .requestNotSupported: ("org.bluez.Error.NotSupported", "Operation is not supported")
        default:
            ("org.bluez.Error.Failed", "Operation failed with ATT error: 0x" + Hex.format(error.rawValue, digits: 2))
        }
    }

    @Test(
        "A server's ATT error reaches a central on the simulator as on BlueZ",
        arguments: [
            ATTError.invalidHandle, .readNotPermitted, .writeNotPermitted, .invalidPDU, .insufficientAuthentication,
            .requestNotSupported, .invalidOffset, .insufficientAuthorization, .prepareQueueFull, .attributeNotFound,
            .attributeNotLong, .insufficientEncryptionKeySize, .invalidAttributeValueLength, .unlikelyError,
            .insufficientEncryption, .unsupportedGroupType, .insufficientResources, .databaseOutOfSync,
            .valueNotAllowed, ATTError(rawValue: 0x80), ATTError(rawValue: 0x9F), .writeRequestRejected,
            .cccdImproperlyConfigured, .procedureAlreadyInProgress, .outOfRange,
        ])
    func attErrors(error: ATTError) {
        let reply = Self.bluezReply(to: error)
        let onBlueZ = BluetoothError.fromBlueZ(name: reply.name, message: reply.message)
        let simulated = BluetoothError.asGATTClientReports(error)
        #expect(simulated.code == onBlueZ.code)
        #expect(simulated.attError == onBlueZ.attError)
        #expect(simulated.message == onBlueZ.message)
        #expect(simulated.errorName == nil)
    }

    @Test(
        "The simulator's connection failure presets are what BlueZ's replies map to",
        arguments: [
            (SimulatedPeripheral.ConnectionFailure.leConnectionAbortByLocal, "org.bluez.Error.Failed"),
            (.inProgress, "org.bluez.Error.InProgress"),
            (.softwareAbort, "org.bluez.Error.Failed"),
        ])
    func connectionFailures(failure: SimulatedPeripheral.ConnectionFailure, name: String) {
        let onBlueZ = BluetoothError.fromBlueZ(name: name, message: failure.message)
        #expect(failure.code == onBlueZ.code)
        #expect(ReconnectPolicy.isTransient(BluetoothError(failure.code, message: failure.message)))
        #expect(ReconnectPolicy.isTransient(onBlueZ))
    }
}
