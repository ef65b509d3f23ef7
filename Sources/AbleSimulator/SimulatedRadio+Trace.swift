import AbleCore
import AbleIO

extension SimulatedRadio {
    /// One thing that happened on a simulated radio, at its simulated time: an entry of
    /// ``SimulatedRadio/trace``.
    ///
    /// Its ``description`` is its stable textual form, one line such as
    /// `0.150000 connected 5A:00:00:00:00:01 → 00:00:00:00:00:01`: the simulated time in seconds
    /// with six decimals, the ``Kind``, and what it concerns. Two runs of the same test give the
    /// same lines.
    public struct Event: Sendable, Hashable, CustomStringConvertible {
        /// What kind of thing happened.
        public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
            /// The kind's name, as the trace's lines show it.
            public let rawValue: String

            /// The kind with the given name.
            ///
            /// - Parameter rawValue: Its name, such as `connected`.
            public init(rawValue: String) { self.rawValue = rawValue }

            public var description: String { rawValue }

            /// A scan started on an adapter.
            public static let scanStarted = Kind(rawValue: "scan-started")
            /// A scan ended.
            public static let scanEnded = Kind(rawValue: "scan-ended")
            /// A scan reported a device.
            public static let discovered = Kind(rawValue: "discovered")
            /// A link came up (the central's services are resolved next).
            public static let connected = Kind(rawValue: "connected")
            /// A connection attempt failed.
            public static let connectionFailed = Kind(rawValue: "connection-failed")
            /// A link ended, with the reason the central heard.
            public static let disconnected = Kind(rawValue: "disconnected")
            /// A central sent a GATT request (a read or a write with response).
            public static let request = Kind(rawValue: "request")
            /// The peripheral answered a request: with its value, or with an error.
            public static let response = Kind(rawValue: "response")
            /// A peripheral sent a notification or indication to its subscribers.
            public static let notification = Kind(rawValue: "notification")
            /// A notification or indication was lost on the way (an injected fault).
            public static let notificationLost = Kind(rawValue: "notification-lost")
            /// A central subscribed to a characteristic.
            public static let subscribed = Kind(rawValue: "subscribed")
            /// A test injected a fault through a ``SimulatedPeripheral``.
            public static let fault = Kind(rawValue: "fault")
        }

        /// When it happened, in simulated time since the clock's zero.
        public let time: Duration
        /// What kind of thing happened.
        public let kind: Kind
        /// What it concerns: the adapters and devices by address, the attribute, the reason.
        public let detail: String

        /// An event.
        ///
        /// - Parameters:
        ///   - time: When it happened, in simulated time since the clock's zero.
        ///   - kind: What kind of thing happened.
        ///   - detail: What it concerns.
        public init(time: Duration, kind: Kind, detail: String) {
            self.time = time
            self.kind = kind
            self.detail = detail
        }

        public var description: String {
            let microseconds = time.components.seconds * 1_000_000 + time.components.attoseconds / 1_000_000_000_000
            let fraction = String(microseconds % 1_000_000)
            let padded = String(repeating: "0", count: 6 - fraction.count) + fraction
            return "\(microseconds / 1_000_000).\(padded) \(kind) \(detail)"
        }
    }

    /// What happened on the radio, oldest first, with simulated times: scans, discoveries,
    /// connections and their failures, disconnections with their reasons, GATT requests and
    /// responses, subscriptions, notifications, and the faults a test injected.
    ///
    /// Running the same test twice gives the same trace: compare two runs' traces (or their
    /// ``Event/description`` lines) to show that a test is deterministic, or print it to see what a
    /// failing test did. Events carry simulated time only, never the wall clock.
    ///
    /// The radio keeps the last ``traceLimit`` events (10,000 by default), so that recording
    /// costs a bounded amount of memory in a long test; ``droppedTraceEventCount`` counts the older
    /// ones it let go.
    public var trace: [Event] {
        state.withLock { $0.trace.events }
    }

    /// How many events ``trace`` keeps: the most recent ones.
    public var traceLimit: Int {
        state.withLock { $0.trace.limit }
    }

    /// How many events ``trace`` let go because it held ``traceLimit`` newer ones.
    public var droppedTraceEventCount: Int {
        state.withLock { $0.trace.dropped }
    }

    /// Adds an event to the trace, at the clock's time now. Not to be called with the radio's
    /// state locked.
    func record(_ kind: Event.Kind, _ detail: @autoclosure () -> String) {
        let event = Event(time: clock.now.offset, kind: kind, detail: detail())
        state.withLock { $0.trace.append(event) }
    }
}

/// The last events of a radio, in a ring of fixed size.
struct RadioTrace {
    let limit: Int
    private var ring: [SimulatedRadio.Event] = []
    /// Where the oldest event is, once the ring is full.
    private var start = 0
    private(set) var dropped = 0

    init(limit: Int) {
        precondition(limit > 0, "a trace keeps at least one event")
        self.limit = limit
    }

    mutating func append(_ event: SimulatedRadio.Event) {
        guard ring.count == limit else {
            ring.append(event)
            return
        }
        ring[start] = event
        start = (start + 1) % limit
        dropped += 1
    }

    var events: [SimulatedRadio.Event] {
        Array(ring[start...] + ring[..<start])
    }
}

extension AttributeID {
    /// The attribute as a trace shows it.
    var traced: String { descriptor.map { "\(service).\(characteristic).\($0)" } ?? "\(service).\(characteristic)" }
}
