/// The state of a single-consumer buffer between a producer that can be paused (a socket's
/// read handler on the event loop) and a consumer that iterates an `AsyncSequence`.
///
/// The producer is paused when the buffer holds ``Watermarks/high`` elements and resumed when the
/// consumer has taken it down to ``Watermarks/low``, so the buffer never holds more than `high`
/// and nothing is dropped.
///
/// Fetching (the `recv(2)` that yields an element) is done by one party at a time, outside the
/// lock: by the producer, or by a consumer that found the buffer empty and fetches for itself.
/// Since only the fetcher adds elements, and a consumer fetches only into an empty buffer, the
/// order is kept. A producer that finds the consumer fetching steps aside: it is paused
/// ("deferred") until the consumer is done, rather than spin or wait for a lock.
///
/// The buffer ends when the producer finishes it, or when the consumer's task is cancelled
/// (``cancel()``), which ends it as a normal finish does: the elements already in it are still
/// delivered, then the end.
///
/// The machine only decides; its storage carries out the actions. `Waiter` is what a suspended
/// consumer waits with (a continuation; a plain value in tests).
package struct WatermarkBufferStateMachine<Element, Waiter> {
    /// How a finished buffer ends, once its elements are taken.
    package enum Termination {
        case finished
        case failed(any Error)
    }

    /// The bounds: pause the producer at `high`, resume it at `low`.
    package struct Watermarks: Hashable, Sendable {
        package var high: Int
        package var low: Int
    }

    private var elements = RingBuffer<Element>()
    private var waiter: Waiter?
    private var termination: Termination?
    private var terminationDelivered = false

    /// Whether the producer is paused because the buffer is full.
    private(set) var isProducerPaused = false

    /// Whether the producer is paused because it found the consumer fetching.
    private(set) var isProducerDeferred = false

    /// Whether someone (producer or consumer) is fetching an element now.
    private(set) var isFetching = false

    /// How many times the producer was paused because the buffer was full.
    private(set) var pauseCount = 0

    /// How many times the consumer found nothing and waited.
    private(set) var waitCount = 0

    /// How many times the consumer fetched for itself, and how many times the producer stepped aside.
    private(set) var consumerFetchCount = 0
    private(set) var stepAsideCount = 0

    /// The bounds.
    package let watermarks: Watermarks

    /// Creates an empty, open buffer.
    ///
    /// - Parameter watermarks: `high` ≥ 1 and `0` ≤ `low` < `high`.
    package init(watermarks: Watermarks) {
        precondition(watermarks.high >= 1 && watermarks.low >= 0 && watermarks.low < watermarks.high)
        self.watermarks = watermarks
    }

    /// How many elements wait for the consumer.
    package var bufferedCount: Int { elements.count }

    // MARK: Producer

    package enum StartFetchAction {
        /// Fetch, then report with ``produce(_:)`` or ``fetchEnded()``.
        case fetch
        /// The consumer is fetching: stop; if `pauseProducer`, pause the producer until it is done.
        case stepAside(pauseProducer: Bool)
    }

    /// The producer wants to fetch an element.
    ///
    /// A producer that is paused (its source suspended) may still be run by a stray kick: it is
    /// told to stop, so that the buffer keeps its bound.
    package mutating func producerStartsFetching() -> StartFetchAction {
        guard !isProducerPaused else { return .stepAside(pauseProducer: false) }
        guard isFetching else {
            isFetching = true
            return .fetch
        }
        guard !isProducerDeferred else { return .stepAside(pauseProducer: false) }
        isProducerDeferred = true
        stepAsideCount += 1
        return .stepAside(pauseProducer: true)
    }

    package enum ProduceAction {
        /// Resume the waiting consumer with the element.
        case resume(Waiter, Element)
        /// The element was buffered.
        case buffered
        /// The element was buffered and the buffer is full: pause the producer.
        case pauseProducer
        /// The buffer has ended; the element is discarded.
        case discard
    }

    /// The producer fetched an element (its fetch is over).
    package mutating func produce(_ element: Element) -> ProduceAction {
        isFetching = false
        guard termination == nil else { return .discard }
        if let waiter {
            self.waiter = nil
            return .resume(waiter, element)
        }
        elements.append(element)
        if elements.count >= watermarks.high && !isProducerPaused {
            isProducerPaused = true
            pauseCount += 1
            return .pauseProducer
        }
        return .buffered
    }

    /// A fetch, by the producer or the consumer, ended without an element for the buffer.
    ///
    /// - Returns: Whether to resume the producer, which stepped aside meanwhile.
    package mutating func fetchEnded() -> Bool {
        isFetching = false
        guard isProducerDeferred else { return false }
        isProducerDeferred = false
        return true
    }

    package enum FinishAction {
        /// Nothing to do (already ended).
        case none
        /// Resume the waiting consumer with the end (`nil` error: a normal end), and the paused
        /// producer `resumeProducer` times so that it can be torn down.
        case end(Waiter?, (any Error)?, resumeProducer: Int)
    }

    /// The producer ends the buffer; elements already in it are still delivered.
    package mutating func finish(_ termination: Termination) -> FinishAction {
        guard self.termination == nil else { return .none }
        self.termination = termination
        let resumeProducer = (isProducerPaused ? 1 : 0) + (isProducerDeferred ? 1 : 0)
        isProducerPaused = false
        isProducerDeferred = false
        guard let waiter else {
            return .end(nil, nil, resumeProducer: resumeProducer)
        }
        self.waiter = nil
        return .end(waiter, takeTermination(), resumeProducer: resumeProducer)
    }

    // MARK: Consumer

    package enum NextAction {
        /// Return this element; if `resumeProducer`, resume the paused producer.
        case element(Element, resumeProducer: Bool)
        /// The buffer is over: return `nil`, or throw the error.
        case end((any Error)?)
        /// Nothing buffered, and no one fetching: fetch an element, then report with
        /// ``consumerFetched(_:)``.
        case fetch
        /// Nothing yet: suspend with ``wait(_:)``.
        case wait
    }

    /// The consumer asks for the next element.
    ///
    /// - Parameter mayFetch: Whether the consumer can fetch for itself.
    package mutating func next(mayFetch: Bool = false) -> NextAction {
        if let element = elements.popFirst() {
            var resumeProducer = false
            if isProducerPaused && elements.count <= watermarks.low {
                isProducerPaused = false
                resumeProducer = true
            }
            return .element(element, resumeProducer: resumeProducer)
        }
        if termination != nil {
            return .end(takeTermination())
        }
        if mayFetch && !isFetching && !isProducerPaused && waiter == nil {
            isFetching = true
            consumerFetchCount += 1
            return .fetch
        }
        return .wait
    }

    /// The consumer's fetch is over; it keeps the element, if it got one.
    ///
    /// - Returns: Whether to resume the producer, which stepped aside meanwhile.
    package mutating func consumerFetched() -> Bool {
        fetchEnded()
    }

    package enum WaitAction {
        /// The waiter is stored; the producer, the end or a cancellation will resume it.
        case suspended
        /// Resume the waiter now with this element (an element arrived in between); if
        /// `resumeProducer`, resume the paused producer.
        case element(Element, resumeProducer: Bool)
        /// Resume the waiter now with the end: `nil`, or throw the error.
        case end((any Error)?)
        /// Another consumer is already waiting: fail this one.
        case busy
    }

    /// The consumer suspends with `waiter`, after ``next(mayFetch:)`` said `.wait` or its fetch
    /// found nothing.
    package mutating func wait(_ waiter: Waiter) -> WaitAction {
        guard self.waiter == nil else { return .busy }
        switch next() {
        case .wait, .fetch:
            self.waiter = waiter
            waitCount += 1
            return .suspended
        case .element(let element, let resumeProducer):
            return .element(element, resumeProducer: resumeProducer)
        case .end(let error):
            return .end(error)
        }
    }

    /// The consumer's task was cancelled: the buffer ends as ``finish(_:)`` with
    /// ``Termination/finished`` ends it. The elements already in it are still delivered, then the
    /// end (an error the producer ended the buffer with before is still delivered); a waiting
    /// consumer is resumed with it, and a paused producer is resumed so that it can go on to
    /// discard what it fetches, or be torn down.
    package mutating func cancel() -> FinishAction {
        finish(.finished)
    }

    private mutating func takeTermination() -> (any Error)? {
        guard !terminationDelivered, case .failed(let error) = termination else { return nil }
        terminationDelivered = true
        return error
    }
}

extension WatermarkBufferStateMachine: Sendable where Element: Sendable, Waiter: Sendable {}
