import Synchronization

/// Admits at most `limit` holders; the others wait in arrival order. Keeps a million-device send
/// from turning into a million buffered requests. Public so the worker can bound the devices it
/// starts by the same budget, before a task (and its memory) exists for each.
public final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
        var head = 0
    }

    private let state: Mutex<State>

    public init(limit: Int) {
        state = Mutex(State(available: limit))
    }

    public func acquire() async {
        let admitted = state.withLock { state -> Bool in
            if state.available > 0 {
                state.available -= 1
                return true
            }
            return false
        }
        if admitted { return }
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Takes a slot only if one is free now (never ahead of a waiter: a free slot means none
    /// waits); for a caller that adds to what it already holds without waiting for more.
    public func tryAcquire() -> Bool {
        state.withLock { state in
            guard state.available > 0 else { return false }
            state.available -= 1
            return true
        }
    }

    public func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.head < state.waiters.count else {
                state.available += 1
                return nil
            }
            let waiter = state.waiters[state.head]
            state.head += 1
            if state.head == state.waiters.count {
                state.waiters.removeAll(keepingCapacity: true)
                state.head = 0
            } else if state.head > 1024 && state.head * 2 > state.waiters.count {
                // Under steady pressure the queue never empties: drop the served prefix so the
                // array does not grow with every waiter ever queued.
                state.waiters.removeFirst(state.head)
                state.head = 0
            }
            return waiter
        }
        next?.resume()
    }
}
