import AbleDBus

/// The producing end of one of Able's streams (``ScanStream``, ``NotificationStream``): yields
/// into the stream's ``DeliveryBuffer`` and counts, in its ``DropCounter``, what a full buffer
/// dropped and what waits for the consumer.
package struct CountedContinuation<Element: Sendable>: Sendable {
    let buffer: DeliveryBuffer<Element>
    let counter: DropCounter

    package func yield(_ element: Element) {
        counter.count(buffer.yield(element))
    }

    /// Whether elements wait in the buffer for the consumer: the simulated radio's clock lets the
    /// consumer take them before it moves time on.
    package var hasUntakenElements: Bool { counter.untaken > 0 }

    package func finish(throwing error: (any Error)? = nil) { buffer.finish(throwing: error) }

    package func onTermination(_ handler: @escaping @Sendable () -> Void) {
        buffer.onTermination(handler)
    }
}
