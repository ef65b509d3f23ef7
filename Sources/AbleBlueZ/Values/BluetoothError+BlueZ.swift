package import AbleCore

// BlueZ's error vocabulary lives here, in the BlueZ backend: the core's `BluetoothError` knows
// codes, messages and ATT errors only, and the simulator raises those directly.
extension BluetoothError {
    /// Creates the error for an error reply from BlueZ, keeping its name and text.
    ///
    /// Every `org.bluez.Error.*` name that BlueZ 5.66 documents or sends maps to a code; an
    /// unknown name maps to `failed`. The name is kept in `errorName` and the text in
    /// `message`. A few replies say more in their text, and get a more specific code or an
    /// ``attError``:
    ///
    /// - `Failed` with a connection failure reason from BlueZ's `doc/errors.txt`, such as
    ///   `le-connection-abort-by-local`: ``Code/notPowered`` for `*-adapter-not-powered`,
    ///   ``Code/alreadyConnected``, ``Code/notSupported``, ``Code/invalidArguments``,
    ///   ``Code/inProgress`` for `*-busy`, ``Code/timeout`` for `*-timeout` and
    ///   `br-connection-page-timeout`, ``Code/disconnected`` for `*-abort-by-remote`,
    ///   ``Code/cancelled`` for `br-connection-canceled`, and ``Code/connectionAttemptFailed``
    ///   for every other `le-connection-*` or `br-connection-*` reason.
    /// - `Failed` whose text is an ATT code (`0x80`, as GATT server handlers reply) or ends in
    ///   one (`Operation failed with ATT error: 0x0e`, as BlueZ's GATT client reports an error
    ///   response): ``Code/attError`` with that ``attError``.
    /// - `Failed` with `Not connected` (BlueZ's GATT client, for a read, write or `StartNotify`
    ///   on a device whose ATT link is gone): ``Code/notConnected``.
    /// - `NotPermitted` with `Read not permitted` or `Write not permitted`: ``attError`` is
    ///   ``ATTError/readNotPermitted`` or ``ATTError/writeNotPermitted``.
    /// - `InvalidArguments` with `Invalid offset` or `Invalid Length` (BlueZ's GATT client):
    ///   ``Code/invalidOffset`` or ``Code/invalidValueLength``, with the matching ``attError``.
    ///
    /// Errors of the bus itself (`org.freedesktop.DBus.Error.*`, such as `ServiceUnknown` or `Spawn.*` when
    /// `bluetoothd` is gone or `NoReply` after a timeout) are not BlueZ's and map to
    /// ``Code/failed`` here; the caller that knows the bus should map them to
    /// ``Code/daemonUnavailable`` or ``Code/timeout`` itself.
    ///
    /// - Parameters:
    ///   - name: The D-Bus error name, such as `org.bluez.Error.Failed`.
    ///   - message: The error's text.
    ///   - cause: The underlying error, if any.
    ///   - file: The file that creates the error; leave the default.
    ///   - line: The line that creates the error; leave the default.
    /// - Returns: The error, with ``errorName`` set to `name`.
    package static func fromBlueZ(
        name: String,
        message: String,
        cause: (any Error)? = nil,
        file: String = #fileID,
        line: Int = #line
    ) -> BluetoothError {
        let prefix = "org.bluez.Error."
        let shortName = name.hasPrefix(prefix) ? String(name.dropFirst(prefix.count)) : ""
        var code = codesByBlueZName[shortName] ?? .failed
        var attError: ATTError?
        switch shortName {
        case "Failed" where message == "Not connected":
            code = .notConnected
        case "Failed":
            if let reasonCode = connectionFailureCode(message) {
                code = reasonCode
            } else if let parsed = parseATTError(message) {
                code = .attError
                attError = parsed
            }
        case "NotPermitted" where message == "Read not permitted":
            attError = .readNotPermitted
        case "NotPermitted" where message == "Write not permitted":
            attError = .writeNotPermitted
        case "InvalidArguments" where message == "Invalid offset":
            code = .invalidOffset
            attError = .invalidOffset
        case "InvalidArguments" where message == "Invalid Length":
            code = .invalidValueLength
            attError = .invalidAttributeValueLength
        case "ImproperlyConfigured":
            attError = .cccdImproperlyConfigured
        default:
            break
        }
        return BluetoothError(
            code,
            message: message,
            cause: cause,
            errorName: name,
            attError: attError,
            file: file,
            line: line
        )
    }

    /// Codes for the names after `org.bluez.Error.` in BlueZ 5.66's documentation and sources,
    /// plus the few later releases added.
    private static let codesByBlueZName: [String: Code] = [
        "AgentNotAvailable": .notAvailable,
        "AlreadyConnected": .alreadyConnected,
        "AlreadyExists": .alreadyExists,
        "AuthenticationCanceled": .authenticationCanceled,
        "AuthenticationFailed": .authenticationFailed,
        "AuthenticationRejected": .authenticationRejected,
        "AuthenticationTimeout": .authenticationTimeout,
        // Setting Powered while rfkill blocks the adapter.
        "Blocked": .notPowered,
        "BREDR.ProfileUnavailable": .notAvailable,
        "Busy": .inProgress,
        "Canceled": .cancelled,
        "ConnectionAttemptFailed": .connectionAttemptFailed,
        "DoesNotExist": .doesNotExist,
        "Failed": .failed,
        "HealthError": .failed,
        "ImproperlyConfigured": .attError,
        "InProgress": .inProgress,
        "InvalidArgs": .invalidArguments,
        "InvalidArguments": .invalidArguments,
        // RegisterAdvertisement: the advertising data does not fit.
        "InvalidLength": .valueTooLong,
        "InvalidOffset": .invalidOffset,
        "InvalidState": .notReady,
        "InvalidValueLength": .invalidValueLength,
        "NoSuchAdapter": .doesNotExist,
        "NotAcquired": .notReady,
        "NotAllowed": .notPermitted,
        "NotAuthorized": .notAuthorized,
        "NotAvailable": .notAvailable,
        "NotConnected": .notConnected,
        "NotFound": .doesNotExist,
        "NotImplemented": .notSupported,
        "NotPermitted": .notPermitted,
        "NotReady": .notReady,
        "NotSupported": .notSupported,
        "OutOfRange": .invalidArguments,
        "Rejected": .rejected,
        "Unsupported": .notSupported,
    ]

    /// The code for a connection failure reason BlueZ puts in a `Failed` reply (`src/error.h`).
    private static func connectionFailureCode(_ reason: String) -> Code? {
        guard reason.hasPrefix("le-connection-") || reason.hasPrefix("br-connection-") else { return nil }
        let detail = reason.dropFirst("le-connection-".count)
        switch detail {
        case "adapter-not-powered": return .notPowered
        case "already-connected": return .alreadyConnected
        case "not-supported": return .notSupported
        case "invalid-arguments", "invalid-argument": return .invalidArguments
        case "busy": return .inProgress
        case "timeout", "page-timeout": return .timeout
        case "abort-by-remote", "aborted-by-remote": return .disconnected
        case "canceled": return .cancelled
        default: return .connectionAttemptFailed
        }
    }

    /// The ATT code in a `Failed` message that is one (`0x80`) or ends in one
    /// (`Operation failed with ATT error: 0x0e`).
    private static func parseATTError(_ message: String) -> ATTError? {
        let marker = "ATT error: "
        let text = message.firstRange(of: marker).map { message[$0.upperBound...] } ?? message[...]
        let utf8 = Array(text.utf8)
        guard utf8.count == 3 || utf8.count == 4, utf8.starts(with: "0x".utf8) || utf8.starts(with: "0X".utf8),
            let code = Hex.parse(utf8.dropFirst(2), as: UInt8.self)
        else { return nil }
        return ATTError(rawValue: code)
    }
}
