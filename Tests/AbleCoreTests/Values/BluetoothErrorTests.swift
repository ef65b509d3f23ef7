import AbleCore
import Testing

struct BluetoothErrorTests {
    @Test("An error records where it was created")
    func location() {
        let line = #line + 1
        let error = BluetoothError(.timeout, message: "No answer")
        #expect(error.location.file == #fileID)
        #expect(error.location.line == line)
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
        #expect(error.errorName == nil)
        #expect(error.description == "attError: Read Not Permitted (0x02)")
    }

    @Test("The description names the ATT error when the code is more specific")
    func descriptionWithATTError() {
        let error = BluetoothError(.notPermitted, message: "Read not permitted", attError: .readNotPermitted)
        #expect(error.description == "notPermitted: Read not permitted [ATT Read Not Permitted (0x02)]")
    }

    @Test("The debug description holds the backend's error name and the location")
    func debugDescription() {
        let error = BluetoothError(.notReady, message: "Resource Not Ready", errorName: "Backend.NotReady")
        #expect(error.debugDescription.contains("notReady"))
        #expect(error.debugDescription.contains("errorName: Backend.NotReady"))
        #expect(error.debugDescription.contains(#fileID))
        #expect(!BluetoothError(.notReady, message: "x").debugDescription.contains("errorName"))
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
            throw BluetoothError(.notConnected, message: "Not Connected")
        } throws: { error in
            (error as? BluetoothError)?.code == .notConnected
        }
    }
}
