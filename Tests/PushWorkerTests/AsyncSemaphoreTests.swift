@testable import PushWorker
import Synchronization
import TestSupport
import Testing

/// The admission gate's two claims: a broadcast (normal) fills what is not reserved and queues; a
/// one-device job (high) takes a reserved slot at once, and is served first when slots free up.
@Suite("AsyncSemaphore: a reserve for high priority")
struct AsyncSemaphoreTests {
    @Test("normal holders never take the reserve; high holders take it at once")
    func reserve() {
        let semaphore = AsyncSemaphore(limit: 4, reserve: 1)
        #expect(semaphore.tryAcquire(.normal) && semaphore.tryAcquire(.normal) && semaphore.tryAcquire(.normal))
        #expect(!semaphore.tryAcquire(.normal), "the fourth slot is reserved")
        #expect(semaphore.tryAcquire(.high))
        #expect(!semaphore.tryAcquire(.high))
        semaphore.release()
        #expect(!semaphore.tryAcquire(.normal))
        #expect(semaphore.tryAcquire(.high))
    }

    @Test("a released slot goes to a waiting high holder before normal ones that came earlier, and to normal ones only beyond the reserve")
    func order() async throws {
        let semaphore = AsyncSemaphore(limit: 2, reserve: 1)
        #expect(semaphore.tryAcquire(.normal) && semaphore.tryAcquire(.high))
        let served = Locked<[String]>([])
        let normal = Task {
            await semaphore.acquire(.normal)
            served.withLock { $0.append("normal") }
        }
        try await waitUntilQueued()
        let high = Task {
            await semaphore.acquire(.high)
            served.withLock { $0.append("high") }
        }
        try await waitUntilQueued()
        #expect(served.value.isEmpty)
        semaphore.release()
        await high.value
        #expect(served.value == ["high"])
        // One slot free of two with one reserved: the normal waiter still waits...
        semaphore.release()
        try await waitUntilQueued()
        #expect(served.value == ["high"])
        // ...until a second is free.
        semaphore.release()
        await normal.value
        #expect(served.value == ["high", "normal"])
    }

    @Test("without a reserve, first come first served, as before")
    func plain() async {
        let semaphore = AsyncSemaphore(limit: 1)
        #expect(semaphore.tryAcquire(.normal))
        #expect(!semaphore.tryAcquire(.high))
        semaphore.release()
        #expect(semaphore.tryAcquire(.high))
        semaphore.release()
    }

    /// The waiters park on a continuation; a little time lets the task get there. (Only order is
    /// checked, never a time: a late task just makes the later steps wait for it.)
    private func waitUntilQueued() async throws {
        try await Task.sleep(for: .milliseconds(50))
    }
}

extension AsyncSemaphoreTests {
    @Test("high holders arriving without end do not starve a normal waiter: one slot in eight handed on goes to it")
    func noStarvation() async throws {
        let semaphore = AsyncSemaphore(limit: 1, reserve: 0)
        #expect(semaphore.tryAcquire(.high))
        let normalServed = Locked(false)
        let normal = Task {
            await semaphore.acquire(.normal)
            normalServed.withLock { $0 = true }
            semaphore.release()
        }
        try await Task.sleep(for: .milliseconds(50))
        // Each round: a high waiter queues, then the holder releases; the slot goes to the high
        // waiter, which becomes the holder. The normal waiter must be served within eight rounds.
        var rounds = 0
        while !normalServed.value && rounds < 8 {
            let high = Task { await semaphore.acquire(.high) }
            try await Task.sleep(for: .milliseconds(20))
            semaphore.release()
            await high.value
            rounds += 1
        }
        #expect(normalServed.value, "the normal waiter was starved through \(rounds) rounds")
        semaphore.release()
        await normal.value
    }
}
