public import AbleCore

/// The services of the seed-002 scenario (`Snippets/ReadAcrossServices.swift` declares the same
/// for itself): the tests of every tier use these.
public enum SeedService: String, ServiceIdentifier {
    case a = "6e400001-0000-1000-8000-00805f9b34fb"
    case b = "6e400002-0000-1000-8000-00805f9b34fb"
}

/// The characteristics of the seed-002 scenario: A1 in service A, B1 (how many notifications to
/// take) and B2 (the notifications) in service B.
public enum SeedCharacteristic: String, CharacteristicIdentifier {
    case a1 = "6e400011-0000-1000-8000-00805f9b34fb"
    case b1 = "6e400021-0000-1000-8000-00805f9b34fb"
    case b2 = "6e400022-0000-1000-8000-00805f9b34fb"

    public var service: any ServiceIdentifier {
        switch self {
        case .a1: SeedService.a
        case .b1, .b2: SeedService.b
        }
    }
}
