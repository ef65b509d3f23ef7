/// An error thrown by Able.
///
/// Every error has a high-level ``code`` that says what kind of failure it is, a ``message``
/// that says what happened, and, where one exists, the ``cause`` underneath. Errors that the
/// backend reported by name keep that name in ``errorName`` and the backend's text in
/// ``message``; errors that carry an Attribute Protocol code have it in ``attError``. The code
/// and the ATT error are the same on every backend; the name and the text are the backend's own.
///
/// Match on the code, not on the message:
///
/// ```swift
/// do {
///     try await peripheral.connect()
/// } catch let error as BluetoothError where error.code == .notPowered {
///     print("the adapter is off: \(error.message)")
/// }
/// ```
public struct BluetoothError: Error, Sendable {
    /// The kind of failure.
    public var code: Code

    /// What went wrong, for people; for an error the backend reported, the backend's own text.
    public var message: String

    /// The underlying error that caused this one, if any.
    public var cause: (any Error)?

    /// The backend's original name for this error, if the backend reported it by name.
    ///
    /// On BlueZ this is the D-Bus error name of BlueZ's reply, such as `org.bluez.Error.Failed`.
    /// It is `nil` for errors Able raises itself, for errors of the bus rather than BlueZ, and on
    /// the simulator, whose errors have a ``code`` (and an ``attError``) but no name. It is there
    /// for logs and bug reports: match on ``code``, which is the same on every backend.
    public var errorName: String?

    /// The Attribute Protocol error behind this error, when it is known.
    ///
    /// The ``code`` is ``Code/attError`` when the ATT code is all there is to say, and a more
    /// specific code otherwise: a read that a server refuses with Read Not Permitted is
    /// ``Code/notPermitted`` with this property set to ``ATTError/readNotPermitted``.
    public var attError: ATTError?

    /// Where in the source this error was created.
    public var location: SourceLocation

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - message: What went wrong, for people.
    ///   - cause: The underlying error, if any.
    ///   - errorName: The backend's original name for the error, if it reported one; `nil`
    ///     for an error that is not a backend's reply.
    ///   - attError: The Attribute Protocol error behind the error, if known.
    ///   - file: The file that creates the error; leave the default.
    ///   - line: The line that creates the error; leave the default.
    public init(
        _ code: Code,
        message: String,
        cause: (any Error)? = nil,
        errorName: String? = nil,
        attError: ATTError? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.cause = cause
        self.errorName = errorName
        self.attError = attError
        self.location = SourceLocation(file: file, line: line)
    }

    /// Creates an error for an Attribute Protocol error response.
    ///
    /// - Parameters:
    ///   - attError: The ATT error code the server responded with.
    ///   - message: What went wrong, for people; defaults to the error code's description.
    ///   - file: The file that creates the error; leave the default.
    ///   - line: The line that creates the error; leave the default.
    public init(attError: ATTError, message: String? = nil, file: String = #fileID, line: Int = #line) {
        self.init(.attError, message: message ?? attError.description, attError: attError, file: file, line: line)
    }
}

extension BluetoothError {
    /// A stable, extensible classification of errors.
    ///
    /// New codes may be added in any release: `switch` over codes with a `default` case.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: Hashable, Sendable {
            case notPowered, notReady, notAvailable, notSupported, unsupported
            case notConnected, alreadyConnected, alreadyExists, doesNotExist, inProgress
            case notPermitted, notAuthorized, rejected
            case invalidArguments, invalidOffset, invalidValueLength, valueTooLong
            case authenticationFailed, authenticationCanceled, authenticationRejected, authenticationTimeout
            case connectionAttemptFailed, disconnected, timeout, cancelled
            case daemonUnavailable, protocolError, attError, failed, internalError
            case adapterRemoved, attributeRemoved
            case peerDisconnected, locallyDisconnected, linkTimeout
        }

        private let wrapped: Wrapped

        private init(_ wrapped: Wrapped) {
            self.wrapped = wrapped
        }

        /// The adapter is powered off, or blocked from powering on.
        public static let notPowered = Code(.notPowered)
        /// The adapter or object is not ready for the operation yet (BlueZ `NotReady`).
        public static let notReady = Code(.notReady)
        /// The resource the operation needs is not available right now (BlueZ `NotAvailable`).
        public static let notAvailable = Code(.notAvailable)
        /// The adapter, BlueZ or the peer does not support the operation (BlueZ `NotSupported`).
        public static let notSupported = Code(.notSupported)
        /// Able, or the backend in use, does not implement the operation.
        public static let unsupported = Code(.unsupported)
        /// The device is not connected (BlueZ `NotConnected`).
        public static let notConnected = Code(.notConnected)
        /// The device is already connected (BlueZ `AlreadyConnected`).
        public static let alreadyConnected = Code(.alreadyConnected)
        /// The object being created already exists (BlueZ `AlreadyExists`).
        public static let alreadyExists = Code(.alreadyExists)
        /// The object named does not exist, or no longer does (BlueZ `DoesNotExist`).
        public static let doesNotExist = Code(.doesNotExist)
        /// An operation of the same kind is already in progress (BlueZ `InProgress`).
        public static let inProgress = Code(.inProgress)
        /// The operation is not permitted, for example reading a characteristic that cannot be
        /// read (BlueZ `NotPermitted`).
        public static let notPermitted = Code(.notPermitted)
        /// The caller is not authorized for the operation (BlueZ `NotAuthorized`).
        public static let notAuthorized = Code(.notAuthorized)
        /// The other party declined the request (BlueZ `Rejected`).
        public static let rejected = Code(.rejected)
        /// An argument was invalid (BlueZ `InvalidArguments`).
        public static let invalidArguments = Code(.invalidArguments)
        /// The offset of a read or write was invalid (BlueZ `InvalidOffset`).
        public static let invalidOffset = Code(.invalidOffset)
        /// The length of a written value was invalid (BlueZ `InvalidValueLength`).
        public static let invalidValueLength = Code(.invalidValueLength)
        /// A value does not fit where it has to go, such as advertising data over its size limit.
        public static let valueTooLong = Code(.valueTooLong)
        /// Pairing failed (BlueZ `AuthenticationFailed`).
        public static let authenticationFailed = Code(.authenticationFailed)
        /// Pairing was canceled (BlueZ `AuthenticationCanceled`).
        public static let authenticationCanceled = Code(.authenticationCanceled)
        /// The peer or the agent rejected pairing (BlueZ `AuthenticationRejected`).
        public static let authenticationRejected = Code(.authenticationRejected)
        /// Pairing timed out (BlueZ `AuthenticationTimeout`).
        public static let authenticationTimeout = Code(.authenticationTimeout)
        /// The connection could not be established (BlueZ `ConnectionAttemptFailed`).
        public static let connectionAttemptFailed = Code(.connectionAttemptFailed)
        /// The peer or the link went away while the operation was under way, or a link ended for a
        /// reason the backend does not tell (BlueZ before 5.83 announces no disconnection reason).
        /// A link whose end has a known reason carries a more specific code:
        /// ``peerDisconnected``, ``locallyDisconnected``, ``linkTimeout``, ``authenticationFailed``.
        public static let disconnected = Code(.disconnected)
        /// The remote device ended the link (BlueZ's disconnection reason `Remote`).
        public static let peerDisconnected = Code(.peerDisconnected)
        /// This host ended the link: a disconnection asked for here, by this process or another
        /// (BlueZ's disconnection reason `Local`).
        public static let locallyDisconnected = Code(.locallyDisconnected)
        /// The link's supervision timeout expired: the device went out of range or stopped
        /// answering (BlueZ's disconnection reason `Timeout`).
        public static let linkTimeout = Code(.linkTimeout)
        /// The operation did not finish in time.
        public static let timeout = Code(.timeout)
        /// The operation was cancelled, by the task or by BlueZ (BlueZ `Canceled`).
        public static let cancelled = Code(.cancelled)
        /// `bluetoothd` is not on the bus, or restarted under the operation.
        public static let daemonUnavailable = Code(.daemonUnavailable)
        /// A peer or BlueZ sent data Able cannot make sense of, such as malformed advertising data.
        public static let protocolError = Code(.protocolError)
        /// A GATT server answered with an Attribute Protocol error; see ``BluetoothError/attError``.
        public static let attError = Code(.attError)
        /// The operation failed for a reason no other code describes (BlueZ `Failed`).
        public static let failed = Code(.failed)
        /// Able broke one of its own invariants; please report it.
        public static let internalError = Code(.internalError)
        /// The adapter went away under the operation (unplugged, or its controller removed) while
        /// `bluetoothd` kept running; one that comes back under the same name works again.
        public static let adapterRemoved = Code(.adapterRemoved)
        /// The characteristic or descriptor was taken out of the peripheral's GATT database while
        /// connected (its services changed, as after a firmware update or a server re-registering
        /// its application); the message names it by UUID and service. Look it up again: the
        /// peripheral's ``Peripheral/serviceChanges()`` say what it serves now.
        public static let attributeRemoved = Code(.attributeRemoved)

        /// The code's name, such as `notPowered`.
        public var description: String {
            String(describing: wrapped)
        }
    }

    /// A place in the source code.
    public struct SourceLocation: Hashable, Sendable, CustomStringConvertible {
        /// The file, as `#fileID` names it: `Module/File.swift`.
        public var file: String
        /// The line in the file.
        public var line: Int

        /// Creates a location.
        ///
        /// - Parameters:
        ///   - file: The file, as `#fileID` names it.
        ///   - line: The line in the file.
        public init(file: String, line: Int) {
            self.file = file
            self.line = line
        }

        /// The location as `file:line`.
        public var description: String {
            "\(file):\(line)"
        }
    }
}

extension BluetoothError: Hashable {
    /// Whether two errors say the same: the same ``code``, ``message``, ``errorName`` and
    /// ``attError``. Where they were created (``location``) and their ``cause`` (any error, not
    /// always comparable) are not compared.
    public static func == (lhs: BluetoothError, rhs: BluetoothError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.errorName == rhs.errorName
            && lhs.attError == rhs.attError
    }

    /// Hashes the parts that ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(errorName)
        hasher.combine(attError)
    }
}

extension BluetoothError: CustomStringConvertible {
    /// The code and message, then the ATT error and the cause when there are any.
    public var description: String {
        var text = "\(code): \(message)"
        if let attError, code != .attError || message != attError.description {
            text += " [ATT \(attError)]"
        }
        if let cause {
            text += " (cause: \(cause))"
        }
        return text
    }
}

extension BluetoothError: CustomDebugStringConvertible {
    /// Everything the error holds, including the backend's error name and where it was created.
    public var debugDescription: String {
        var text = "BluetoothError(\(code): \(String(reflecting: message))"
        if let errorName {
            text += ", errorName: \(errorName)"
        }
        if let attError {
            text += ", attError: \(attError)"
        }
        if let cause {
            text += ", cause: \(String(reflecting: cause))"
        }
        return text + ", at \(location))"
    }
}
