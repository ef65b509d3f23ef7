/// An Attribute Protocol error code, as a GATT server sends it in an ATT Error Response.
///
/// The codes and their names come from the Bluetooth Core Specification, Vol 3, Part F, 3.4.1.1
/// ("Error codes"), and from the Core Specification Supplement, Part B ("Common profile and
/// service error codes") for `0xE0`–`0xFF`. Codes `0x80`–`0x9F` are application errors whose
/// meaning a profile or an application defines.
///
/// A local GATT server's handlers throw these to answer a read or write with an error:
///
/// ```swift
/// throw ATTError.insufficientAuthorization
/// ```
///
/// - Important: A server that runs on BlueZ can send only some codes: the application errors,
///   ``readNotPermitted``, ``writeNotPermitted``, ``insufficientAuthorization``,
///   ``requestNotSupported``, ``invalidOffset``, ``invalidAttributeValueLength`` and
///   ``procedureAlreadyInProgress``. BlueZ sends any other code as ``unlikelyError``.
public struct ATTError: RawRepresentable, Hashable, Sendable, Error {
    /// The code as it appears in the Error Response PDU.
    public let rawValue: UInt8

    /// Creates an error from its code.
    ///
    /// - Parameter rawValue: The code as it appears in the Error Response PDU.
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// Creates an application error, whose meaning the profile or application defines.
    ///
    /// - Parameter code: A code in `0x80...0x9F`.
    /// - Returns: `nil` if `code` is outside the application error range.
    public static func application(_ code: UInt8) -> ATTError? {
        applicationErrors.contains(code) ? ATTError(rawValue: code) : nil
    }

    static let applicationErrors: ClosedRange<UInt8> = 0x80...0x9F

    /// The attribute handle given was not valid on this server (`0x01`, Invalid Handle).
    public static let invalidHandle = ATTError(rawValue: 0x01)
    /// The attribute cannot be read (`0x02`, Read Not Permitted).
    public static let readNotPermitted = ATTError(rawValue: 0x02)
    /// The attribute cannot be written (`0x03`, Write Not Permitted).
    public static let writeNotPermitted = ATTError(rawValue: 0x03)
    /// The attribute PDU was invalid (`0x04`, Invalid PDU).
    public static let invalidPDU = ATTError(rawValue: 0x04)
    /// The attribute requires authentication before it can be read or written
    /// (`0x05`, Insufficient Authentication).
    public static let insufficientAuthentication = ATTError(rawValue: 0x05)
    /// The server does not support the request received from the client (`0x06`, Request Not Supported).
    public static let requestNotSupported = ATTError(rawValue: 0x06)
    /// The offset specified was past the end of the attribute (`0x07`, Invalid Offset).
    public static let invalidOffset = ATTError(rawValue: 0x07)
    /// The attribute requires authorization before it can be read or written
    /// (`0x08`, Insufficient Authorization).
    public static let insufficientAuthorization = ATTError(rawValue: 0x08)
    /// Too many prepare writes have been queued (`0x09`, Prepare Queue Full).
    public static let prepareQueueFull = ATTError(rawValue: 0x09)
    /// No attribute was found within the given handle range (`0x0A`, Attribute Not Found).
    public static let attributeNotFound = ATTError(rawValue: 0x0A)
    /// The attribute cannot be read using the Read Blob Request (`0x0B`, Attribute Not Long).
    public static let attributeNotLong = ATTError(rawValue: 0x0B)
    /// The encryption key size used for the link is too short
    /// (`0x0C`, Encryption Key Size Too Short; Insufficient Encryption Key Size before Core 5.3).
    public static let insufficientEncryptionKeySize = ATTError(rawValue: 0x0C)
    /// The attribute value length is invalid for the operation (`0x0D`, Invalid Attribute Value Length).
    public static let invalidAttributeValueLength = ATTError(rawValue: 0x0D)
    /// The request met an unlikely error and could not be completed (`0x0E`, Unlikely Error).
    public static let unlikelyError = ATTError(rawValue: 0x0E)
    /// The attribute requires encryption before it can be read or written (`0x0F`, Insufficient Encryption).
    public static let insufficientEncryption = ATTError(rawValue: 0x0F)
    /// The attribute type is not a supported grouping attribute (`0x10`, Unsupported Group Type).
    public static let unsupportedGroupType = ATTError(rawValue: 0x10)
    /// Insufficient resources to complete the request (`0x11`, Insufficient Resources).
    public static let insufficientResources = ATTError(rawValue: 0x11)
    /// The server requests the client to rediscover the database (`0x12`, Database Out Of Sync).
    public static let databaseOutOfSync = ATTError(rawValue: 0x12)
    /// The attribute parameter value was not allowed (`0x13`, Value Not Allowed).
    public static let valueNotAllowed = ATTError(rawValue: 0x13)

    /// The write request was rejected (`0xFC`, Write Request Rejected).
    public static let writeRequestRejected = ATTError(rawValue: 0xFC)
    /// The Client Characteristic Configuration descriptor is not configured as the operation
    /// requires (`0xFD`, CCCD Improperly Configured).
    public static let cccdImproperlyConfigured = ATTError(rawValue: 0xFD)
    /// A request cannot be serviced because an operation is still in progress
    /// (`0xFE`, Procedure Already in Progress).
    public static let procedureAlreadyInProgress = ATTError(rawValue: 0xFE)
    /// An attribute value is out of range (`0xFF`, Out of Range).
    public static let outOfRange = ATTError(rawValue: 0xFF)

    /// Whether this is an application error (`0x80`–`0x9F`), whose meaning the profile or
    /// application defines.
    public var isApplicationError: Bool {
        Self.applicationErrors.contains(rawValue)
    }
}

extension ATTError: CustomStringConvertible {
    /// The specification's name for the code followed by its value, such as
    /// `Read Not Permitted (0x02)`.
    public var description: String {
        "\(name) (0x\(Hex.format(rawValue, digits: 2, uppercase: true)))"
    }

    private var name: String {
        switch rawValue {
        case 0x01: "Invalid Handle"
        case 0x02: "Read Not Permitted"
        case 0x03: "Write Not Permitted"
        case 0x04: "Invalid PDU"
        case 0x05: "Insufficient Authentication"
        case 0x06: "Request Not Supported"
        case 0x07: "Invalid Offset"
        case 0x08: "Insufficient Authorization"
        case 0x09: "Prepare Queue Full"
        case 0x0A: "Attribute Not Found"
        case 0x0B: "Attribute Not Long"
        case 0x0C: "Encryption Key Size Too Short"
        case 0x0D: "Invalid Attribute Value Length"
        case 0x0E: "Unlikely Error"
        case 0x0F: "Insufficient Encryption"
        case 0x10: "Unsupported Group Type"
        case 0x11: "Insufficient Resources"
        case 0x12: "Database Out Of Sync"
        case 0x13: "Value Not Allowed"
        case Self.applicationErrors: "Application Error"
        case 0xE0...0xFB: "Common Profile Error"
        case 0xFC: "Write Request Rejected"
        case 0xFD: "CCCD Improperly Configured"
        case 0xFE: "Procedure Already in Progress"
        case 0xFF: "Out of Range"
        default: "Reserved ATT Error"
        }
    }
}
