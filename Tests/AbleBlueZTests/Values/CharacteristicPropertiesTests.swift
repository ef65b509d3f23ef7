import Able
import Testing

@testable import AbleBlueZ

struct CharacteristicPropertiesTests {
    @Test(
        "Each property has the Core Specification's bit and BlueZ's flag",
        arguments: [
            (CharacteristicProperties.broadcast, 0x01, "broadcast"), (.read, 0x02, "read"),
            (.writeWithoutResponse, 0x04, "write-without-response"), (.write, 0x08, "write"),
            (.notify, 0x10, "notify"), (.indicate, 0x20, "indicate"),
            (.authenticatedSignedWrites, 0x40, "authenticated-signed-writes"),
            (.extendedProperties, 0x80, "extended-properties"), (.reliableWrite, 0x0100, "reliable-write"),
            (.writableAuxiliaries, 0x0200, "writable-auxiliaries"),
        ] as [(CharacteristicProperties, UInt16, String)]
    )
    func bitsAndFlags(property: CharacteristicProperties, bit: UInt16, flag: String) {
        #expect(property.rawValue == bit)
        #expect(property.bluezFlags == [flag])
        #expect(CharacteristicProperties(bluezFlags: [flag]).contains(property))
    }

    @Test(
        "Properties round-trip through BlueZ's Flags of a remote characteristic",
        arguments: [
            [], [.read], [.read, .notify], [.read, .write, .writeWithoutResponse, .indicate],
            [.broadcast, .authenticatedSignedWrites], [.write, .reliableWrite, .extendedProperties],
            [.read, .writableAuxiliaries, .extendedProperties], CharacteristicProperties(rawValue: 0x03FF),
        ] as [CharacteristicProperties]
    )
    func remoteFlagsRoundTrip(properties: CharacteristicProperties) {
        #expect(CharacteristicProperties(bluezFlags: properties.bluezFlags) == properties)
    }

    @Test("Flags come in BlueZ's order")
    func flagOrder() {
        let properties: CharacteristicProperties = [.indicate, .read, .write]
        #expect(properties.bluezFlags == ["read", "write", "indicate"])
        #expect(properties.description == "[read, write, indicate]")
    }

    @Test(
        "Security flags imply the property they protect, as BlueZ's parse_chrc_flags does",
        arguments: [
            ("encrypt-read", CharacteristicProperties.read), ("encrypt-authenticated-read", .read),
            ("secure-read", .read), ("encrypt-write", .write), ("encrypt-authenticated-write", .write),
            ("secure-write", .write), ("encrypt-notify", .notify), ("encrypt-authenticated-notify", .notify),
            ("secure-notify", .notify), ("encrypt-indicate", .indicate),
            ("encrypt-authenticated-indicate", .indicate), ("secure-indicate", .indicate),
        ]
    )
    func securityFlagsImplyProperties(flag: String, property: CharacteristicProperties) {
        #expect(CharacteristicProperties(bluezFlags: [flag]) == property)
    }

    @Test("Extended properties imply the extended-properties bit, and unknown flags are ignored")
    func extendedAndUnknown() {
        #expect(CharacteristicProperties(bluezFlags: ["reliable-write"]) == [.reliableWrite, .extendedProperties])
        #expect(CharacteristicProperties(bluezFlags: ["authorize", "x-notify", "read"]) == .read)
    }

    @Test(
        "Permissions turn property flags into BlueZ's security flags",
        arguments: [
            ([.read, .notify], [], ["read", "notify"]),
            ([.read], [.readable], ["read"]),
            ([.read], [.readEncrypted], ["encrypt-read"]),
            (
                [.read, .write], [.readEncryptedAuthenticated, .writeSecure],
                ["encrypt-authenticated-read", "secure-write"]
            ),
            ([.read, .indicate], [.readEncrypted, .subscribeEncrypted], ["encrypt-read", "encrypt-indicate"]),
            ([.notify, .indicate], [.subscribeSecure], ["secure-notify", "secure-indicate"]),
            ([.read], [.authorizePreparedWrites], ["read", "authorize"]),
            ([.write, .writeWithoutResponse], [.writeEncrypted], ["write-without-response", "encrypt-write"]),
            ([.writeWithoutResponse], [.writeEncrypted], ["write-without-response", "encrypt-write"]),
            ([.write], [.readEncrypted], ["write"]),
            ([.read], [.writeEncrypted, .subscribeEncrypted], ["read"]),
        ] as [(CharacteristicProperties, AttributePermissions, [String])]
    )
    func localFlags(properties: CharacteristicProperties, permissions: AttributePermissions, flags: [String]) {
        #expect(properties.bluezFlags(permissions: permissions) == flags)
    }

    @Test(
        "Properties and permissions of a local characteristic round-trip through BlueZ's Flags",
        arguments: [
            ([.read], [.readable]),
            ([.read, .write], [.readable, .writable, .readEncrypted, .writeEncryptedAuthenticated]),
            ([.read, .notify], [.readable, .readSecure, .subscribeEncryptedAuthenticated]),
            ([.write, .reliableWrite, .extendedProperties], [.writable, .writeSecure, .authorizePreparedWrites]),
            ([.indicate], [.subscribeEncrypted]),
            ([.read, .write], [.readable, .writable, .readEncrypted, .readEncryptedAuthenticated, .readSecure]),
        ] as [(CharacteristicProperties, AttributePermissions)]
    )
    func localFlagsRoundTrip(properties: CharacteristicProperties, permissions: AttributePermissions) {
        let flags = properties.bluezFlags(permissions: permissions)
        #expect(CharacteristicProperties(bluezFlags: flags) == properties)
        #expect(AttributePermissions(bluezFlags: flags) == permissions)
    }
}
