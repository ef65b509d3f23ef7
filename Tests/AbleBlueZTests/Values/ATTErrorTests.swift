import Able
import Testing

@testable import AbleBlueZ

struct ATTErrorTests {
    @Test(
        "Each named code has the value the Core Specification assigns",
        arguments: [
            (ATTError.invalidHandle, 0x01), (.readNotPermitted, 0x02), (.writeNotPermitted, 0x03), (.invalidPDU, 0x04),
            (.insufficientAuthentication, 0x05), (.requestNotSupported, 0x06), (.invalidOffset, 0x07),
            (.insufficientAuthorization, 0x08), (.prepareQueueFull, 0x09), (.attributeNotFound, 0x0A),
            (.attributeNotLong, 0x0B), (.insufficientEncryptionKeySize, 0x0C), (.invalidAttributeValueLength, 0x0D),
            (.unlikelyError, 0x0E), (.insufficientEncryption, 0x0F), (.unsupportedGroupType, 0x10),
            (.insufficientResources, 0x11), (.databaseOutOfSync, 0x12), (.valueNotAllowed, 0x13),
            (.writeRequestRejected, 0xFC), (.cccdImproperlyConfigured, 0xFD), (.procedureAlreadyInProgress, 0xFE),
            (.outOfRange, 0xFF),
        ] as [(ATTError, UInt8)]
    )
    func assignedValues(error: ATTError, value: UInt8) {
        #expect(error.rawValue == value)
        #expect(!error.isApplicationError)
    }

    @Test(
        "Application errors are exactly 0x80 to 0x9F", arguments: [0x00, 0x7F, 0x80, 0x90, 0x9F, 0xA0, 0xFF] as [UInt8])
    func applicationRange(value: UInt8) {
        let isApplication = (0x80...0x9F).contains(value)
        #expect(ATTError(rawValue: value).isApplicationError == isApplication)
        #expect(ATTError.application(value) == (isApplication ? ATTError(rawValue: value) : nil))
    }

    @Test(
        "Descriptions give the specification's name and the code",
        arguments: [
            (ATTError.readNotPermitted, "Read Not Permitted (0x02)"),
            (.insufficientEncryptionKeySize, "Encryption Key Size Too Short (0x0C)"),
            (.unlikelyError, "Unlikely Error (0x0E)"),
            (ATTError(rawValue: 0x80), "Application Error (0x80)"),
            (ATTError(rawValue: 0x9F), "Application Error (0x9F)"),
            (ATTError(rawValue: 0xE0), "Common Profile Error (0xE0)"),
            (.cccdImproperlyConfigured, "CCCD Improperly Configured (0xFD)"),
            (ATTError(rawValue: 0x14), "Reserved ATT Error (0x14)"),
            (ATTError(rawValue: 0x00), "Reserved ATT Error (0x00)"),
        ]
    )
    func descriptions(error: ATTError, text: String) {
        #expect(error.description == text)
    }

    @Test("An ATT error can be thrown and caught as itself")
    func throwable() {
        #expect(throws: ATTError.insufficientAuthorization) {
            throw ATTError.insufficientAuthorization
        }
    }

    @Test(
        "Codes BlueZ can send map to the error names of BlueZ's gatt-database.c",
        arguments: [
            (ATTError.readNotPermitted, "org.bluez.Error.NotPermitted"),
            (.writeNotPermitted, "org.bluez.Error.NotPermitted"),
            (.insufficientAuthorization, "org.bluez.Error.NotAuthorized"),
            (.requestNotSupported, "org.bluez.Error.NotSupported"),
            (.invalidOffset, "org.bluez.Error.InvalidOffset"),
            (.invalidAttributeValueLength, "org.bluez.Error.InvalidValueLength"),
            (.procedureAlreadyInProgress, "org.bluez.Error.InProgress"),
            (ATTError(rawValue: 0x80), "org.bluez.Error.Failed"),
            (ATTError(rawValue: 0x9F), "org.bluez.Error.Failed"),
        ]
    )
    func bluezNames(error: ATTError, name: String) {
        #expect(error.bluezErrorName == name)
        #expect(error.bluezReply.name == name)
    }

    @Test(
        "Codes BlueZ cannot send have no BlueZ name",
        arguments: [
            ATTError.invalidHandle, .invalidPDU, .insufficientAuthentication, .prepareQueueFull, .attributeNotFound,
            .attributeNotLong, .insufficientEncryptionKeySize, .unlikelyError, .insufficientEncryption,
            .unsupportedGroupType, .insufficientResources, .databaseOutOfSync, .valueNotAllowed,
            .writeRequestRejected, .cccdImproperlyConfigured, .outOfRange, ATTError(rawValue: 0xA0),
        ]
    )
    func inexpressibleCodes(error: ATTError) {
        #expect(error.bluezErrorName == nil)
    }

    /// BlueZ 5.66's `dbus_error_to_att_ecode` from `src/gatt-database.c`, transcribed, to check
    /// that the replies Able sends come back as the intended codes.
    private static func bluezATTCode(name: String, message: String, isWrite: Bool) -> UInt8 {
        switch name {
        case "org.bluez.Error.Failed":
            let digits = message.hasPrefix("0x") ? message.dropFirst(2) : Substring(message)
            let radix = message.hasPrefix("0x") ? 16 : 10
            guard !message.isEmpty else { return 0x0E }
            guard let code = UInt32(digits, radix: radix) else { return 0x80 }
            return (0x80...0x9F).contains(code) ? UInt8(code) : 0x0E
        case "org.bluez.Error.NotSupported": return 0x06
        case "org.bluez.Error.NotAuthorized": return 0x08
        case "org.bluez.Error.InvalidValueLength": return 0x0D
        case "org.bluez.Error.InvalidOffset": return 0x07
        case "org.bluez.Error.InProgress": return 0xFE
        case "org.bluez.Error.NotPermitted": return isWrite ? 0x03 : 0x02
        default: return 0x0E
        }
    }

    @Test(
        "Every code's BlueZ reply comes back from BlueZ as that code, or as Unlikely Error if BlueZ cannot send it",
        arguments: 0...255)
    func bluezReplyRoundTrips(value: Int) {
        let error = ATTError(rawValue: UInt8(value))
        let reply = error.bluezReply
        let expected = error.bluezErrorName == nil ? ATTError.unlikelyError.rawValue : error.rawValue
        let isWrite = error != .readNotPermitted
        #expect(Self.bluezATTCode(name: reply.name, message: reply.message, isWrite: isWrite) == expected)
    }

    @Test("Application errors are replied as Failed with the code as message")
    func applicationReply() {
        let reply = ATTError(rawValue: 0x8A).bluezReply
        #expect(reply.name == "org.bluez.Error.Failed")
        #expect(reply.message == "0x8a")
    }

    @Test("A code BlueZ cannot send is replied as Failed naming the intended code")
    func inexpressibleReply() {
        let reply = ATTError.insufficientAuthentication.bluezReply
        #expect(reply.name == "org.bluez.Error.Failed")
        #expect(reply.message == "0x05")
    }
}
