import Testing

@testable import AbleIO

/// The plain state machines behind the channel, driven synchronously.
struct L2CAPWatermarkBufferTests {
    typealias Machine = WatermarkBufferStateMachine<Int, String>

    @Test(
        "The producer pauses at the high watermark and resumes at the low one",
        arguments: [(4, 1), (1, 0), (8, 7)]
    )
    func watermarks(high: Int, low: Int) {
        var machine = Machine(watermarks: .init(high: high, low: low))
        for value in 0..<(high - 1) {
            guard case .buffered = machine.produce(value) else {
                Issue.record("paused before the high watermark")
                return
            }
        }
        guard case .pauseProducer = machine.produce(high - 1) else {
            Issue.record("not paused at the high watermark")
            return
        }
        #expect(machine.isProducerPaused)
        guard case .stepAside(pauseProducer: false) = machine.producerStartsFetching() else {
            Issue.record("a paused producer was let fetch")
            return
        }
        for expected in 0..<(high - low - 1) {
            guard case .element(expected, resumeProducer: false) = machine.next() else {
                Issue.record("resumed above the low watermark")
                return
            }
        }
        guard case .element(high - low - 1, resumeProducer: true) = machine.next() else {
            Issue.record("not resumed at the low watermark")
            return
        }
        #expect(!machine.isProducerPaused)
        #expect(machine.bufferedCount == low)
        #expect(machine.pauseCount == 1)
    }

    @Test("A waiting consumer gets the next element directly, and an end after the buffer drains")
    func waiterAndEnd() {
        var machine = Machine(watermarks: .init(high: 4, low: 1))
        guard case .wait = machine.next(), case .suspended = machine.wait("a") else {
            Issue.record("did not wait on an empty buffer")
            return
        }
        guard case .resume("a", 7) = machine.produce(7) else {
            Issue.record("the element did not go to the waiter")
            return
        }
        _ = machine.produce(8)
        guard
            case .end(nil, nil, resumeProducer: 0) = machine.finish(.failed(SocketError(.peerClosed, message: "")))
        else {
            Issue.record("unexpected finish action")
            return
        }
        guard case .element(8, _) = machine.next() else {
            Issue.record("a buffered element was lost at the end")
            return
        }
        guard case .end(let error?) = machine.next() else {
            Issue.record("the error was not delivered")
            return
        }
        #expect((error as? SocketError)?.reason == .peerClosed)
        guard case .end(nil) = machine.next() else {
            Issue.record("the error was delivered twice")
            return
        }
        guard case .discard = machine.produce(9) else {
            Issue.record("an element after the end was kept")
            return
        }
    }

    @Test("Finishing resumes a paused producer so that it can be torn down")
    func finishResumesProducer() {
        var machine = Machine(watermarks: .init(high: 1, low: 0))
        _ = machine.produce(1)
        #expect(machine.isProducerPaused)
        guard case .end(nil, nil, resumeProducer: 1) = machine.finish(.finished) else {
            Issue.record("a paused producer was left paused")
            return
        }
        guard case .element(1, resumeProducer: false) = machine.next() else {
            Issue.record("the producer was resumed twice")
            return
        }
    }

    @Test("A producer that finds the consumer fetching steps aside once and is resumed after")
    func consumerFetches() {
        var machine = Machine(watermarks: .init(high: 4, low: 1))
        guard case .fetch = machine.next(mayFetch: true) else {
            Issue.record("the consumer may not fetch into an empty buffer")
            return
        }
        guard case .stepAside(pauseProducer: true) = machine.producerStartsFetching(),
            case .stepAside(pauseProducer: false) = machine.producerStartsFetching()
        else {
            Issue.record("the producer fetched alongside the consumer, or was paused twice")
            return
        }
        let resumeProducer = machine.consumerFetched()
        #expect(resumeProducer)
        #expect(!machine.isProducerDeferred)
        guard case .fetch = machine.producerStartsFetching() else {
            Issue.record("the producer could not fetch after the consumer")
            return
        }
        guard case .wait = machine.next(mayFetch: true) else {
            Issue.record("the consumer fetched alongside the producer")
            return
        }
        let resumeAfterOwnFetch = machine.fetchEnded()
        #expect(!resumeAfterOwnFetch)
    }

    @Test("Finishing while the producer stands aside resumes it, so that it can be torn down")
    func finishWhileDeferred() {
        var machine = Machine(watermarks: .init(high: 4, low: 1))
        _ = machine.next(mayFetch: true)
        _ = machine.producerStartsFetching()
        guard case .end(nil, nil, resumeProducer: 1) = machine.finish(.finished) else {
            Issue.record("a deferred producer was left paused")
            return
        }
        let resumeAgain = machine.consumerFetched()
        #expect(!resumeAgain)
        guard case .end(nil) = machine.next(mayFetch: true) else {
            Issue.record("the consumer fetched after the end")
            return
        }
    }

    @Test("A second waiter is refused")
    func busy() {
        var machine = Machine(watermarks: .init(high: 4, low: 1))
        guard case .wait = machine.next(), case .suspended = machine.wait("a") else {
            Issue.record("did not wait")
            return
        }
        guard case .wait = machine.next(), case .busy = machine.wait("b") else {
            Issue.record("a second waiter was accepted")
            return
        }
    }

    @Test("Cancelling the consumer ends the buffer: the waiter gets the end, and once only")
    func cancelWhileWaiting() {
        var machine = Machine(watermarks: .init(high: 4, low: 1))
        guard case .wait = machine.next(), case .suspended = machine.wait("a") else {
            Issue.record("did not wait")
            return
        }
        guard case .end("a", nil, resumeProducer: 0) = machine.cancel() else {
            Issue.record("the waiter was not handed back with the end")
            return
        }
        guard case .none = machine.cancel() else {
            Issue.record("the buffer ended twice")
            return
        }
        guard case .end(nil) = machine.next(), case .discard = machine.produce(1) else {
            Issue.record("the buffer went on after the cancellation")
            return
        }
    }

    @Test("Cancelling the consumer still delivers what was buffered, and a paused producer is resumed")
    func cancelWithBufferedElements() {
        var machine = Machine(watermarks: .init(high: 2, low: 0))
        _ = machine.produce(1)
        guard case .pauseProducer = machine.produce(2) else {
            Issue.record("not paused at the high watermark")
            return
        }
        guard case .end(nil, nil, resumeProducer: 1) = machine.cancel() else {
            Issue.record("a paused producer was left paused")
            return
        }
        guard case .element(1, resumeProducer: false) = machine.next(),
            case .element(2, resumeProducer: false) = machine.next(),
            case .end(nil) = machine.next()
        else {
            Issue.record("the buffered elements were not delivered before the end")
            return
        }
        guard case .discard = machine.produce(3), case .fetch = machine.producerStartsFetching() else {
            Issue.record("the resumed producer may not fetch to discard")
            return
        }
    }

    @Test("Cancelling after the producer failed still delivers the error")
    func cancelAfterFailure() {
        var machine = Machine(watermarks: .init(high: 4, low: 1))
        _ = machine.finish(.failed(SocketError(.peerClosed, message: "")))
        guard case .none = machine.cancel(), case .end(let error?) = machine.next() else {
            Issue.record("the cancellation replaced the error")
            return
        }
        #expect((error as? SocketError)?.reason == .peerClosed)
    }
}

struct L2CAPSendStateMachineTests {
    typealias Machine = SendStateMachine<String>

    @Test("Sends queue behind a waiting one in order, and the writer runs only while they wait")
    func queueing() {
        var machine = Machine()
        guard case .sendNow = machine.start() else {
            Issue.record("an idle channel did not send at once")
            return
        }
        guard case .queued(resumeWriter: true) = machine.enqueue(id: 1, packet: [1], waiter: "a", tryFirst: false)
        else {
            Issue.record("the writer was not started")
            return
        }
        guard case .wait(let id) = machine.start(),
            case .queued(resumeWriter: false) = machine.enqueue(id: id, packet: [2], waiter: "b", tryFirst: true)
        else {
            Issue.record("a send overtook a waiting one")
            return
        }
        #expect(machine.nextPacket == [1])
        let first = machine.takeOne()
        let idleWithOneLeft = machine.writerIdle()
        #expect(first == "a")
        #expect(!idleWithOneLeft)
        #expect(machine.nextPacket == [2])
        let second = machine.takeOne()
        let idleWhenEmpty = machine.writerIdle()
        #expect(second == "b")
        #expect(idleWhenEmpty)
        #expect(machine.waitCount == 2)
    }

    @Test("A cancelled send leaves the queue without disturbing the others")
    func cancel() {
        var machine = Machine()
        for (id, name) in [(1, "a"), (2, "b"), (3, "c")] {
            _ = machine.enqueue(id: UInt64(id), packet: [UInt8(id)], waiter: name, tryFirst: false)
        }
        let cancelled = machine.cancel(id: 2)
        let cancelledAgain = machine.cancel(id: 2)
        let first = machine.takeOne()
        #expect(cancelled == "b")
        #expect(cancelledAgain == nil)
        #expect(first == "a")
        #expect(machine.nextPacket == [3])
    }

    @Test("A batch queues as one send: its waiter comes with its last packet, and it cancels whole")
    func batches() {
        var machine = Machine()
        _ = machine.enqueue(id: 1, packets: .many([[1], [2], [3]]), from: 1, waiter: "batch", tryFirst: false)
        _ = machine.enqueue(id: 2, packet: [4], waiter: "after", tryFirst: false)
        #expect(machine.pendingCount == 3)
        #expect(machine.waitCount == 2)
        #expect(machine.nextPacket == [2])
        let beforeItsLast = machine.takeOne()
        #expect(beforeItsLast == nil)
        #expect(machine.nextPacket == [3])
        let atItsLast = machine.takeOne()
        #expect(atItsLast == "batch")
        #expect(machine.nextPacket == [4])

        _ = machine.enqueue(id: 3, packets: .many([[5], [6]]), from: 0, waiter: "cancelled", tryFirst: false)
        let cancelled = machine.cancel(id: 3)
        #expect(cancelled == "cancelled")
        #expect(machine.pendingCount == 1)
    }

    @Test("A packet the socket refuses ends its whole send, and only it")
    func refusalEndsTheWholeSend() {
        var machine = Machine()
        _ = machine.enqueue(id: 1, packets: .many([[1], [2], [3]]), from: 0, waiter: "batch", tryFirst: false)
        _ = machine.enqueue(id: 2, packet: [4], waiter: "after", tryFirst: false)
        let refused = machine.removeNextSend()
        #expect(refused == "batch")
        #expect(machine.nextPacket == [4])
        let failed = machine.fail(SocketError(.peerClosed, message: "gone"))
        #expect(failed == ["after"])
    }

    @Test("A failure fails the waiting sends and every later one")
    func failure() {
        var machine = Machine()
        _ = machine.enqueue(id: 1, packet: [1], waiter: "a", tryFirst: false)
        let failed = machine.fail(SocketError(.peerClosed, message: "gone"))
        #expect(failed == ["a"])
        guard case .fail(let error) = machine.start(), error.reason == .peerClosed else {
            Issue.record("a send after the failure was allowed")
            return
        }
        guard case .fail = machine.enqueue(id: 2, packet: [2], waiter: "b", tryFirst: false) else {
            Issue.record("a send after the failure was queued")
            return
        }
        _ = machine.fail(SocketError(.closed, message: "closed"))
        #expect(machine.failure?.reason == .peerClosed)
    }

    @Test("Queued packets read ahead in order across sends and the ring's wrap; taking them finishes each send once")
    func readingAhead() {
        var machine = Machine()
        // Ten sends in and out first, so that the next ones wrap around the ring's 16 slots.
        for id in 0..<10 { _ = machine.enqueue(id: UInt64(id), packet: [0], waiter: "early", tryFirst: false) }
        for _ in 0..<10 { _ = machine.takeOne() }
        let batch = (0..<12).map { [UInt8($0)] }
        _ = machine.enqueue(id: 10, packets: .many(batch[...]), from: 2, waiter: "batch", tryFirst: false)
        for id in 11..<21 {
            _ = machine.enqueue(id: UInt64(id), packet: [UInt8(id + 1)], waiter: "single \(id)", tryFirst: false)
        }
        #expect(machine.pendingCount == 20)
        let ahead = machine.readingAhead { next in (0..<20).map { _ in next() } }
        #expect(ahead == (2..<22).map { [UInt8($0)] })

        var finished: [String] = []
        machine.removeSent(9) { finished.append($0) }
        #expect(finished.isEmpty)
        #expect(machine.nextPacket == [11])
        machine.removeSent(3) { finished.append($0) }
        #expect(finished == ["batch", "single 11", "single 12"])
        #expect(machine.pendingCount == 8)
        #expect(machine.nextPacket == [14])
        let again = machine.readingAhead { next in (0..<8).map { _ in next() } }
        #expect(again == (14..<22).map { [UInt8($0)] })

        #expect(machine.cancel(id: 15) == "single 15")
        #expect(machine.pendingCount == 7)
        #expect(machine.removeNextSend() == "single 13")
        #expect(machine.nextPacket == [15])
    }
}

extension SendStateMachine {
    /// The socket took one packet: the waiter of the send it finished, if it finished one.
    fileprivate mutating func takeOne() -> Waiter? {
        var finished: Waiter?
        removeSent(1) { finished = $0 }
        return finished
    }
}
