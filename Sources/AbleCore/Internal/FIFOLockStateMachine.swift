/// The state of a ``FIFOLock``: who holds it and who waits, in order.
///
/// A waiter takes a ticket first and arrives with its waiter afterwards, so that a cancellation
/// that comes in between (a task cancelled before it got to wait) is not lost. The lock passes
/// straight from a holder to the first waiter, so nobody can cut in between.
package struct FIFOLockStateMachine<Waiter> {
    private var isHeld = false
    private var waiters: [(ticket: UInt64, waiter: Waiter)] = []
    /// Tickets taken but not yet arrived, and whether they were cancelled meanwhile.
    private var announced: [UInt64: Bool] = [:]
    private var lastTicket: UInt64 = 0

    package init() {}

    /// How many wait for the lock.
    package var waiterCount: Int { waiters.count }

    /// Takes the lock at once if nobody holds it or waits for it.
    package mutating func lockIfFree() -> Bool {
        guard !isHeld else { return false }
        isHeld = true
        return true
    }

    /// A ticket for a waiter to arrive with.
    package mutating func takeTicket() -> UInt64 {
        lastTicket += 1
        announced[lastTicket] = false
        return lastTicket
    }

    package enum ArrivalAction {
        /// The lock is the waiter's: go ahead.
        case proceed
        /// The waiter is in line; ``unlock()`` or ``cancel(_:)`` will give it back.
        case wait
        /// The ticket was cancelled before it arrived: throw.
        case cancelled
    }

    /// Queues a waiter behind everyone who arrived before it, or lets it go ahead.
    package mutating func arrive(_ ticket: UInt64, with waiter: Waiter) -> ArrivalAction {
        guard let cancelled = announced.removeValue(forKey: ticket) else {
            preconditionFailure("ticket \(ticket) arrived twice or was never taken")
        }
        if cancelled { return .cancelled }
        if lockIfFree() { return .proceed }
        waiters.append((ticket, waiter))
        return .wait
    }

    /// Cancels a ticket: returns its waiter, taken out of line, when it was waiting; nothing when
    /// it holds the lock or is done (its operation sees the task's cancellation itself).
    package mutating func cancel(_ ticket: UInt64) -> Waiter? {
        if let index = waiters.firstIndex(where: { $0.ticket == ticket }) {
            return waiters.remove(at: index).waiter
        }
        if announced[ticket] != nil { announced[ticket] = true }
        return nil
    }

    /// Lets go of the lock: returns the waiter that holds it now, if anyone waited.
    package mutating func unlock() -> Waiter? {
        precondition(isHeld, "unlocking a FIFOLock nobody holds")
        guard !waiters.isEmpty else {
            isHeld = false
            return nil
        }
        return waiters.removeFirst().waiter
    }
}

extension FIFOLockStateMachine: Sendable where Waiter: Sendable {}
