import AbleCore
import Testing

struct BluetoothErrorTests {
    @Test(
        "Every org.bluez.Error name BlueZ documents or sends maps to its code",
        arguments: [
            ("AgentNotAvailable", BluetoothError.Code.notAvailable), ("AlreadyConnected", .alreadyConnected),
            ("AlreadyExists", .alreadyExists), ("AuthenticationCanceled", .authenticationCanceled),
            ("AuthenticationFailed", .authenticationFailed), ("AuthenticationRejected", .authenticationRejected),
            ("AuthenticationTimeout", .authenticationTimeout), ("Blocked", .notPowered),
            ("BREDR.ProfileUnavailable", .notAvailable), ("Busy", .inProgress), ("Canceled", .cancelled),
            ("ConnectionAttemptFailed", .connectionAttemptFailed), ("DoesNotExist", .doesNotExist),
            ("Failed", .failed), ("HealthError", .failed), ("ImproperlyConfigured", .attError),
            ("InProgress", .inProgress), ("InvalidArgs", .invalidArguments), ("InvalidArguments", .invalidArguments),
            ("InvalidLength", .valueTooLong), ("InvalidOffset", .invalidOffset), ("InvalidState", .notReady),
            ("InvalidValueLength", .invalidValueLength), ("NoSuchAdapter", .doesNotExist), ("NotAcquired", .notReady),
            ("NotAllowed", .notPermitted), ("NotAuthorized", .notAuthorized), ("NotAvailable", .notAvailable),
            ("NotConnected", .notConnected), ("NotFound", .doesNotExist), ("NotImplemented", .notSupported),
            ("NotPermitted", .notPermitted), ("NotReady", .notReady), ("NotSupported", .notSupported),
            ("OutOfRange", .invalidArguments), ("Rejected", .rejected), ("Unsupported", .notSupported),
        ]
    )
    func namesMapToCodes(shortName: String, code: BluetoothError.Code) {
        let name = "org.bluez.Error." + shortName
        let error = BluetoothError.fromBlueZ(name: name, message: "Something happened")
        #expect(error.code == code)
        #expect(error.errorName == name)
        #expect(error.message == "Something happened")
    }

    @Test(
        "Unknown and foreign error names map to failed and keep name and text",
        arguments: [
            "org.bluez.Error.SomethingNew", "org.bluez.mesh.Error.Busy", "org.freedesktop.DBus.Error.Failed", "",
        ]
    )
    func unknownNamesAreFailed(name: String) {
        let error = BluetoothError.fromBlueZ(name: name, message: "text")
        #expect(error.code == .failed)
        #expect(error.errorName == name)
        #expect(error.message == "text")
        #expect(error.attError == nil)
    }

    @Test(
        "Connection failure reasons in Failed replies get specific codes",
        arguments: [
            ("le-connection-adapter-not-powered", BluetoothError.Code.notPowered),
            ("br-connection-adapter-not-powered", .notPowered),
            ("le-connection-already-connected", .alreadyConnected),
            ("br-connection-already-connected", .alreadyConnected),
            ("le-connection-not-supported", .notSupported), ("br-connection-not-supported", .notSupported),
            ("le-connection-invalid-arguments", .invalidArguments),
            ("br-connection-invalid-argument", .invalidArguments),
            ("le-connection-busy", .inProgress), ("br-connection-busy", .inProgress),
            ("le-connection-timeout", .timeout), ("br-connection-timeout", .timeout),
            ("br-connection-page-timeout", .timeout),
            ("le-connection-abort-by-remote", .disconnected), ("br-connection-aborted-by-remote", .disconnected),
            ("br-connection-canceled", .cancelled),
            ("le-connection-abort-by-local", .connectionAttemptFailed),
            ("br-connection-aborted-by-local", .connectionAttemptFailed),
            ("le-connection-refused", .connectionAttemptFailed),
            ("le-connection-create-socket", .connectionAttemptFailed),
            ("le-connection-bad-socket", .connectionAttemptFailed),
            ("le-connection-memory-allocation", .connectionAttemptFailed),
            ("le-connection-concurrent-connection-limit", .connectionAttemptFailed),
            ("le-connection-link-layer-protocol-error", .connectionAttemptFailed),
            ("le-connection-gatt-browsing", .connectionAttemptFailed),
            ("le-connection-unknown", .connectionAttemptFailed),
            ("br-connection-sdp-search", .connectionAttemptFailed),
            ("br-connection-profile-unavailable", .connectionAttemptFailed),
            ("le-connection-key-missing", .connectionAttemptFailed),
        ]
    )
    func connectionFailureReasons(reason: String, code: BluetoothError.Code) {
        let error = BluetoothError.fromBlueZ(name: "org.bluez.Error.Failed", message: reason)
        #expect(error.code == code)
        #expect(error.message == reason)
        #expect(error.errorName == "org.bluez.Error.Failed")
    }

    @Test func aGATTOperationOnALinkThatIsGoneIsNotConnected() {
        // src/gatt-client.c answers a read, write or StartNotify without an ATT link so (seen in the soak).
        let error = BluetoothError.fromBlueZ(name: "org.bluez.Error.Failed", message: "Not connected")
        #expect(error.code == .notConnected)
        #expect(error.errorName == "org.bluez.Error.Failed")
        #expect(ReconnectPolicy.isTransient(error))
    }

    @Test(
        "ATT codes in Failed replies become attError",
        arguments: [
            ("Operation failed with ATT error: 0x0e", ATTError.unlikelyError),
            ("Operation failed with ATT error: 0x05", .insufficientAuthentication),
            ("Operation failed with ATT error: 0x80", ATTError(rawValue: 0x80)),
            ("0x80", ATTError(rawValue: 0x80)), ("0x9f", ATTError(rawValue: 0x9F)), ("0X9F", ATTError(rawValue: 0x9F)),
            ("0x1", .invalidHandle),
        ]
    )
    func attCodesInFailed(message: String, attError: ATTError) {
        let error = BluetoothError.fromBlueZ(name: "org.bluez.Error.Failed", message: message)
        #expect(error.code == .attError)
        #expect(error.attError == attError)
        #expect(error.message == message)
    }

    @Test(
        "Failed replies without a readable ATT code stay failed",
        arguments: ["Operation failed", "0x", "0x123", "0xZZ", "ATT error: 0x", "Input/output error", "128", ""]
    )
    func failedWithoutATTCode(message: String) {
        let error = BluetoothError.fromBlueZ(name: "org.bluez.Error.Failed", message: message)
        #expect(error.code == .failed)
        #expect(error.attError == nil)
    }

    @Test(
        "BlueZ's GATT client messages for ATT error responses keep the ATT code",
        arguments: [
            ("NotPermitted", "Read not permitted", BluetoothError.Code.notPermitted, ATTError.readNotPermitted),
            ("NotPermitted", "Write not permitted", .notPermitted, .writeNotPermitted),
            ("InvalidArguments", "Invalid offset", .invalidOffset, .invalidOffset),
            ("InvalidArguments", "Invalid Length", .invalidValueLength, .invalidAttributeValueLength),
            ("ImproperlyConfigured", "", .attError, .cccdImproperlyConfigured),
        ]
    )
    func gattClientMessages(shortName: String, message: String, code: BluetoothError.Code, attError: ATTError) {
        let error = BluetoothError.fromBlueZ(name: "org.bluez.Error." + shortName, message: message)
        #expect(error.code == code)
        #expect(error.attError == attError)
    }

    @Test("Messages that name no ATT code leave attError empty", arguments: ["Not paired", "Write acquired"])
    func notPermittedWithoutATTCode(message: String) {
        let error = BluetoothError.fromBlueZ(name: "org.bluez.Error.NotPermitted", message: message)
        #expect(error.code == .notPermitted)
        #expect(error.attError == nil)
    }

    @Test("An error records where it was created")
    func location() {
        let line = #line + 1
        let error = BluetoothError(.timeout, message: "No answer")
        #expect(error.location.file == #fileID)
        #expect(error.location.line == line)
        let mapped = BluetoothError.fromBlueZ(name: "org.bluez.Error.Failed", message: "x")
        #expect(mapped.location.file == #fileID)
    }

    @Test("An error keeps its cause")
    func cause() throws {
        let inner = BluetoothError(.daemonUnavailable, message: "bluetoothd is gone")
        let error = BluetoothError(.disconnected, message: "Link lost", cause: inner)
        let cause = try #require(error.cause as? BluetoothError)
        #expect(cause.code == .daemonUnavailable)
        #expect(error.description == "disconnected: Link lost (cause: daemonUnavailable: bluetoothd is gone)")
    }

    @Test("An ATT error response becomes an attError error described by its code")
    func attErrorInitializer() {
        let error = BluetoothError(attError: .readNotPermitted)
        #expect(error.code == .attError)
        #expect(error.attError == .readNotPermitted)
        #expect(error.description == "attError: Read Not Permitted (0x02)")
    }

    @Test("The description names the ATT error when the code is more specific")
    func descriptionWithATTError() {
        let error = BluetoothError.fromBlueZ(name: "org.bluez.Error.NotPermitted", message: "Read not permitted")
        #expect(error.description == "notPermitted: Read not permitted [ATT Read Not Permitted (0x02)]")
    }

    @Test("The debug description holds the BlueZ name and the location")
    func debugDescription() {
        let error = BluetoothError.fromBlueZ(name: "org.bluez.Error.NotReady", message: "Resource Not Ready")
        #expect(error.debugDescription.contains("notReady"))
        #expect(error.debugDescription.contains("org.bluez.Error.NotReady"))
        #expect(error.debugDescription.contains(#fileID))
    }

    @Test("Codes compare by identity and describe themselves by name")
    func codes() {
        #expect(BluetoothError.Code.notPowered == .notPowered)
        #expect(BluetoothError.Code.notPowered != .notReady)
        #expect(BluetoothError.Code.notSupported != .unsupported)
        #expect(BluetoothError.Code.daemonUnavailable.description == "daemonUnavailable")
        #expect(Set<BluetoothError.Code>([.failed, .failed, .timeout]).count == 2)
    }

    @Test("An error can be thrown and matched on its code")
    func matching() {
        #expect {
            throw BluetoothError.fromBlueZ(name: "org.bluez.Error.NotConnected", message: "Not Connected")
        } throws: { error in
            (error as? BluetoothError)?.code == .notConnected
        }
    }
}
