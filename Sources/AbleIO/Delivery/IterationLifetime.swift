/// Ends a ``DeliveryBuffer`` when the last copy of the stream value that holds it goes away (even
/// if it was never iterated), and, through ``forIterator()``, when an iterator goes away, so that
/// leaving a `for try await` loop ends the work behind the stream while the stream is still
/// referenced.
package final class IterationLifetime<Element: Sendable>: Sendable {
    private let buffer: DeliveryBuffer<Element>

    package init(_ buffer: DeliveryBuffer<Element>) {
        self.buffer = buffer
    }

    /// A lifetime of its own for one iterator.
    package func forIterator() -> IterationLifetime { IterationLifetime(buffer) }

    deinit {
        buffer.finish()
    }
}
