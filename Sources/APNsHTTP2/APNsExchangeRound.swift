import Metrics
import Synchronization

/// The answers to one round of a batch send, filled in from the connections' threads as they
/// come and awaited once by the sending task: one object and one task resume for the round,
/// not a continuation and a resumed task per notification (which cost more CPU than the
/// HTTP/2 engine itself). Each answer also frees its stream in the pool and is timed.
final class APNsExchangeRound: Sendable {
    private struct State {
        var outcomes: [APNsExchangeOutcome?]
        /// The pool connection carrying each slot.
        var connections: [Int]
        var startedAt: [ContinuousClock.Instant]
        var remaining: Int
        var waiter: UnsafeContinuation<Void, Never>?
    }

    private let state: Mutex<State>
    private let pool: APNsConnectionPool
    private let latency: CoreMetrics.Timer
    /// Where the requests go, for the transports' error messages.
    let baseURL: String

    init(count: Int, pool: APNsConnectionPool, latency: CoreMetrics.Timer, baseURL: String) {
        self.baseURL = baseURL
        let now = ContinuousClock.now
        state = Mutex(State(
            outcomes: Array(repeating: nil, count: count), connections: Array(repeating: 0, count: count),
            startedAt: Array(repeating: now, count: count), remaining: count))
        self.pool = pool
        self.latency = latency
    }

    /// Records which connection the slots go out on, just before they are handed to it.
    func assign(_ slots: Range<Int>, to connection: Int) {
        let now = ContinuousClock.now
        state.withLock { state in
            for slot in slots {
                state.connections[slot] = connection
                state.startedAt[slot] = now
            }
        }
    }

    /// The answer for `slot`; called exactly once per slot, from any thread.
    func complete(_ slot: Int, _ outcome: APNsExchangeOutcome) {
        let now = ContinuousClock.now
        let (connection, startedAt, waiter) = state.withLock { state in
            state.outcomes[slot] = outcome
            state.remaining -= 1
            var waiter: UnsafeContinuation<Void, Never>?
            if state.remaining == 0 { swap(&waiter, &state.waiter) }
            return (state.connections[slot], state.startedAt[slot], waiter)
        }
        latency.record(duration: now - startedAt)
        // APNs raises a connection's stream limit once it has accepted the credentials; a 403
        // (or no answer at all) leaves the connection at one stream.
        if case .response(let status, _, _, _) = outcome, status != 403 {
            pool.release(connection, answered: true)
        } else {
            pool.release(connection, answered: false)
        }
        waiter?.resume()
    }

    /// Every slot's answer, once all have come.
    func outcomes() async -> [APNsExchangeOutcome] {
        await withUnsafeContinuation { (waiter: UnsafeContinuation<Void, Never>) in
            let done = state.withLock { state in
                if state.remaining == 0 { return true }
                state.waiter = waiter
                return false
            }
            if done { waiter.resume() }
        }
        return state.withLock { state in state.outcomes.map { $0! } }
    }
}
