@testable import PushWorker
import Testing

/// The worker's event queue keeps what the worker relied on `AsyncStream` for: every delivery
/// reaches the loop once and in order from several threads, a finish ends the loop after what was
/// kept, and a cancelled loop stops waiting.
@Suite("EventQueue: the worker's deliveries to its loop")
struct EventQueueTests {
    @Test("events yielded from several threads while the reader waits and while it works all come out once, each thread's in its order")
    func concurrentYields() async {
        let queue = EventQueue<Int>()
        let threads = 4, each = 20_000
        let reader = Task {
            var read: [Int] = []
            read.reserveCapacity(threads * each)
            while read.count < threads * each, let event = await queue.next() { read.append(event) }
            return read
        }
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<threads {
                group.addTask {
                    for index in 0..<each {
                        queue.yield(thread * each + index)
                        if index % 1_000 == 0 { await Task.yield() }
                    }
                }
            }
        }
        let read = await reader.value
        #expect(read.count == threads * each)
        #expect(Set(read).count == threads * each, "no event twice")
        for thread in 0..<threads {
            let own = read.filter { $0 / each == thread }
            // The first that is not the next of its thread, if any (the whole lists are too long to print).
            let stray = zip(own, thread * each..<(thread + 1) * each).first { $0 != $1 }
            #expect(own.count == each && stray == nil, "thread \(thread)'s events in order: \(own.count) read, first out of order \(String(describing: stray))")
        }
    }

    @Test("an event yielded to a parked reader wakes it")
    func yieldWakesReader() async throws {
        let queue = EventQueue<Int>()
        let reader = Task { await queue.next() }
        try await waitUntilParked(queue)
        queue.yield(7)
        #expect(await reader.value == 7)
        #expect(!queue.readerWaits)
    }

    /// Waits until the reader has parked; fails only when it makes no progress for a long while.
    private func waitUntilParked<Element>(_ queue: EventQueue<Element>) async throws {
        for _ in 0..<6_000 where !queue.readerWaits { try await Task.sleep(for: .milliseconds(10)) }
        #expect(queue.readerWaits, "the reader parked")
    }

    @Test("a reader that stays behind does not keep the events it read: they go once they are half of those held")
    func readEventsDropped() async {
        let queue = EventQueue<Int>()
        for event in 0..<200 { queue.yield(event) }
        for expected in 0..<150 { #expect(await queue.next() == expected) }
        #expect(queue.held == 100, "the first 100 read were dropped; 50 read and 50 unread held")
        for expected in 150..<200 { #expect(await queue.next() == expected) }
        #expect(queue.held == 0)
    }

    @Test("a finish gives the reader what was kept, then nil; events after it are dropped")
    func finishAfterKept() async {
        let queue = EventQueue<String>()
        queue.yield("a")
        queue.yield("b")
        queue.finish()
        queue.yield("after")
        #expect(await queue.next() == "a")
        #expect(await queue.next() == "b")
        #expect(await queue.next() == nil)
        #expect(await queue.next() == nil)
    }

    @Test("a finish wakes a reader that waits")
    func finishWakesReader() async throws {
        let queue = EventQueue<Int>()
        let reader = Task { await queue.next() }
        try await waitUntilParked(queue)
        queue.finish()
        #expect(await reader.value == nil)
    }

    @Test("cancelling the reading task while it waits gives it nil and finishes the queue")
    func cancelledReader() async throws {
        let queue = EventQueue<Int>()
        let reader = Task { await queue.next() }
        try await waitUntilParked(queue)
        reader.cancel()
        #expect(await reader.value == nil)
        queue.yield(1)
        #expect(await queue.next() == nil, "finished by the cancel: later events are dropped")
    }
}
