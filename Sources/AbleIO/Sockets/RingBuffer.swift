/// A first-in, first-out queue with amortized O(1) appends and removals at the front.
package struct RingBuffer<Element> {
    private var storage: [Element?] = []
    private var head = 0

    /// How many elements the queue holds.
    package private(set) var count = 0

    package init() {}

    package var isEmpty: Bool { count == 0 }

    /// The oldest element.
    package var first: Element? { count == 0 ? nil : storage[head] }

    /// The element `offset` places from the oldest (`0` is ``first``); `offset` must be less than
    /// ``count``.
    package subscript(offset offset: Int) -> Element {
        precondition(offset >= 0 && offset < count, "offset \(offset) out of a queue of \(count)")
        return storage[(head + offset) % storage.count]!
    }

    /// Changes the oldest element in place; the queue must not be empty.
    package mutating func updateFirst(_ update: (inout Element) -> Void) {
        precondition(count > 0, "no first element to update in an empty queue")
        update(&storage[head]!)
    }

    package mutating func append(_ element: Element) {
        if count == storage.count { grow() }
        storage[(head + count) % storage.count] = element
        count += 1
    }

    package mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
        count -= 1
        return element
    }

    /// Removes the first element that matches, keeping the order of the others.
    package mutating func removeFirst(where matches: (Element) -> Bool) -> Element? {
        var kept = RingBuffer()
        var removed: Element?
        while let element = popFirst() {
            if removed == nil && matches(element) {
                removed = element
            } else {
                kept.append(element)
            }
        }
        self = kept
        return removed
    }

    /// Removes every element that matches, keeping the order of the others; returns them, oldest
    /// first.
    package mutating func removeAll(where matches: (Element) -> Bool) -> [Element] {
        var kept = RingBuffer()
        var removed: [Element] = []
        while let element = popFirst() {
            if matches(element) {
                removed.append(element)
            } else {
                kept.append(element)
            }
        }
        self = kept
        return removed
    }

    /// Removes and returns all elements, oldest first.
    package mutating func removeAll() -> [Element] {
        var all: [Element] = []
        all.reserveCapacity(count)
        while let element = popFirst() { all.append(element) }
        return all
    }

    private mutating func grow() {
        var grown = [Element?](repeating: nil, count: Swift.max(16, storage.count * 2))
        for index in 0..<count {
            grown[index] = storage[(head + index) % storage.count]
        }
        storage = grown
        head = 0
    }
}

extension RingBuffer: Sendable where Element: Sendable {}
