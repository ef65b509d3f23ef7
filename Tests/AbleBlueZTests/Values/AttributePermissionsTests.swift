import Able
import Testing

@testable import AbleBlueZ

struct AttributePermissionsTests {
    @Test(
        "Each descriptor flag BlueZ lists gives the permissions BlueZ's parse_desc_flags gives",
        arguments: [
            ("read", [.readable]), ("write", [.writable]),
            ("encrypt-read", [.readable, .readEncrypted]), ("encrypt-write", [.writable, .writeEncrypted]),
            ("encrypt-authenticated-read", [.readable, .readEncryptedAuthenticated]),
            ("encrypt-authenticated-write", [.writable, .writeEncryptedAuthenticated]),
            ("secure-read", [.readable, .readSecure]), ("secure-write", [.writable, .writeSecure]),
            ("authorize", [.authorizePreparedWrites]),
        ] as [(String, AttributePermissions)]
    )
    func descriptorFlags(flag: String, permissions: AttributePermissions) {
        #expect(AttributePermissions(bluezFlags: [flag]) == permissions)
        #expect(permissions.bluezDescriptorFlags == [flag])
    }

    @Test(
        "Write properties in characteristic flags grant writing",
        arguments: ["write", "write-without-response", "authenticated-signed-writes", "reliable-write"]
    )
    func writePropertiesAreWritable(flag: String) {
        #expect(AttributePermissions(bluezFlags: [flag]) == .writable)
    }

    @Test("Flags without a permission are ignored", arguments: ["notify", "indicate", "broadcast", "bogus"])
    func flagsWithoutPermissions(flag: String) {
        #expect(AttributePermissions(bluezFlags: [flag]) == [])
    }

    @Test(
        "Descriptor permissions round-trip through BlueZ's Flags",
        arguments: [
            [], [.readable], [.readable, .writable], [.readable, .readEncrypted, .writable],
            [.writable, .writeEncryptedAuthenticated, .authorizePreparedWrites],
            [.readable, .readSecure, .writable, .writeSecure],
            [.readable, .readEncrypted, .readEncryptedAuthenticated, .writable, .writeEncrypted],
        ] as [AttributePermissions]
    )
    func descriptorRoundTrip(permissions: AttributePermissions) {
        #expect(AttributePermissions(bluezFlags: permissions.bluezDescriptorFlags) == permissions)
    }

    @Test("A security requirement implies the access it protects")
    func requirementImpliesAccess() {
        let permissions: AttributePermissions = [.readEncrypted, .writeSecure]
        #expect(permissions.bluezDescriptorFlags == ["encrypt-read", "secure-write"])
        #expect(
            AttributePermissions(bluezFlags: permissions.bluezDescriptorFlags)
                == permissions.union([.readable, .writable]))
    }

    @Test("Subscribe requirements do not apply to descriptors")
    func subscribeIsLeftOutOfDescriptorFlags() {
        let permissions: AttributePermissions = [.readable, .subscribeEncrypted]
        #expect(permissions.bluezDescriptorFlags == ["read"])
    }

    @Test("Read and write bits match BlueZ's BT_ATT_PERM values")
    func rawValuesMatchBlueZ() {
        #expect(AttributePermissions.readable.rawValue == 0x0001)
        #expect(AttributePermissions.writable.rawValue == 0x0002)
        #expect(AttributePermissions.readEncrypted.rawValue == 0x0004)
        #expect(AttributePermissions.writeEncrypted.rawValue == 0x0008)
        #expect(AttributePermissions.readEncryptedAuthenticated.rawValue == 0x0010)
        #expect(AttributePermissions.writeEncryptedAuthenticated.rawValue == 0x0020)
        #expect(AttributePermissions.readSecure.rawValue == 0x0100)
        #expect(AttributePermissions.writeSecure.rawValue == 0x0200)
    }

    @Test("Permissions describe themselves by name")
    func description() {
        let permissions: AttributePermissions = [.writeEncrypted, .readable]
        #expect(permissions.description == "[readable, writeEncrypted]")
    }
}
