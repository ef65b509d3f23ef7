// Fuzzes the parsers of values that arrive from other processes and devices: advertising data
// (AD structures), UUID and address text, BlueZ's device path components, GATT object paths,
// and BlueZ error names and messages with the ATT errors inside them. The first byte chooses
// the parser; what parses must print and parse back to the same value.

import AbleCore
import AbleDBus

@testable import AbleBlueZ

@_cdecl("FuzzValues_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv, testOneInput)
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var reader = FuzzReader(fuzzInput(data, size))
    switch reader.byte() % 6 {
    case 0: advertisingData(reader.rest())
    case 1:
        // The same bytes as text and as a UUID's little-endian bytes: `rest()` consumes them.
        let bytes = reader.rest()
        uuid(String(decoding: bytes, as: UTF8.self), bytes: bytes)
    case 2: address(String(decoding: reader.rest(), as: UTF8.self))
    case 3: bluezError(name: reader.string(), message: String(decoding: reader.rest(), as: UTF8.self))
    case 4: attError(reader.byte())
    default: gattPath(String(decoding: reader.rest(), as: UTF8.self))
    }
    return 0
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}

private func advertisingData(_ bytes: [UInt8]) {
    guard let parsed = try? AdvertisementData(advertisingBytes: bytes) else { return }
    _ = parsed.encodedLength
    guard let encoded = try? parsed.advertisingBytes else { return }
    check(encoded.count == parsed.encodedLength, "encodedLength \(parsed.encodedLength) for \(encoded.count) bytes")
    guard let again = try? AdvertisementData(advertisingBytes: encoded) else {
        fatalError("advertising data Able encoded does not parse: \(encoded)")
    }
    // The encoding groups service and solicited UUIDs by width, so only their order may change.
    var reordered = again
    reordered.serviceUUIDs = parsed.serviceUUIDs
    reordered.solicitedUUIDs = parsed.solicitedUUIDs
    check(
        reordered == parsed && Set(again.serviceUUIDs) == Set(parsed.serviceUUIDs)
            && Set(again.solicitedUUIDs) == Set(parsed.solicitedUUIDs),
        "advertising data changed on the way through its bytes: \(parsed) became \(again)")
}

private func uuid(_ text: String, bytes: [UInt8]) {
    if let uuid = BluetoothUUID(text) {
        check(BluetoothUUID(uuid.uuidString) == uuid, "UUID \(text) does not survive its own uuidString")
        check(
            BluetoothUUID(littleEndianBytes: uuid.littleEndianBytes) == uuid, "UUID \(text) does not survive its bytes")
        _ = uuid.description
    }
    // The byte form BlueZ and the simulator hand over (2, 4 or 16 bytes): what parses must
    // survive its own bytes and text.
    if let uuid = BluetoothUUID(littleEndianBytes: bytes) {
        check(BluetoothUUID(uuid.uuidString) == uuid, "UUID bytes \(bytes) do not survive their uuidString")
        check(
            BluetoothUUID(littleEndianBytes: uuid.littleEndianBytes) == uuid,
            "UUID bytes \(bytes) do not survive their own bytes")
    }
}

private func address(_ text: String) {
    if let address = BluetoothAddress(text) {
        check(BluetoothAddress(address.description) == address, "address \(text) does not survive its description")
        check(
            BluetoothAddress(bluezPathComponent: address.bluezPathComponent) == address,
            "address \(text) does not survive its BlueZ path component")
        check(BluetoothAddress(littleEndianBytes: address.littleEndianBytes) == address, "address bytes")
    }
    _ = BluetoothAddress(bluezPathComponent: text)
}

private func bluezError(name: String, message: String) {
    for name in [name, "org.bluez.Error." + name, "org.bluez.Error.Failed", "org.bluez.Error.NotPermitted"] {
        let error = BluetoothError.fromBlueZ(name: name, message: message)
        _ = error.description
        if error.attError != nil, name == "org.bluez.Error.Failed" {
            check(error.code == .attError, "an ATT error in Failed gives code \(error.code)")
        }
    }
}

private func attError(_ code: UInt8) {
    let error = ATTError(rawValue: code)
    let reply = error.bluezReply
    _ = error.description
    // What an Able server answers comes back to a BlueZ central as the same ATT error.
    if error.isApplicationError {
        let seen = BluetoothError.fromBlueZ(name: reply.name, message: reply.message)
        check(seen.attError == error, "application error \(code) came back as \(String(describing: seen.attError))")
    }
}

private func gattPath(_ text: String) {
    guard let path = DBusObjectPath(rawValue: text) else { return }
    for device in ["/org/bluez/hci0/dev_00_AA_01_01_00_01", path.parent?.rawValue, path.parent?.parent?.rawValue] {
        guard let device, let device = DBusObjectPath(rawValue: device),
            let id = RemoteAttributeID(path: path, device: device)
        else { continue }
        check(id.path(device: device) == path, "\(path) does not survive its identity under \(device)")
    }
}
