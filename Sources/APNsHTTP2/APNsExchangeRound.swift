import Metrics
import Synchronization

/// The answers to one batch send, filled in from the connections' threads as they come and
/// taken by the sending task in waves: one object for the batch, and a resumed task per wave
/// rather than a continuation and a resumed task per notification (which cost more CPU than
/// the HTTP/2 engine itself). Each answer also frees its stream in the pool and is timed.
/// Slots are the batch's request indices; a slot sent again (a retry) is assigned again.
package final class APNsExchangeRound: Sendable {
    private struct State {
        /// Answers not yet taken, in arrival order.
        var ready: [(Int, APNsExchangeOutcome)] = []
        /// Requests handed to a connection and not yet answered.
        var inFlight = 0
        /// The pool connection carrying each slot, and when it was handed over.
        var connections: [Int]
        var startedAt: [ContinuousClock.Instant]
        var waiter: UnsafeContinuation<Void, Never>?

        /// A wave is due once at least half of what is still out has answered: few wake-ups
        /// under load, and a straggler soon waits alone.
        var waveDue: Bool { !ready.isEmpty && ready.count >= inFlight }
    }

    private let state: Mutex<State>
    private let pool: APNsConnectionPool
    private let latency: CoreMetrics.Timer
    /// Where the requests go, for the transports' error messages.
    let baseURL: String
    /// APNs' rule: a 403 (the credentials refused) leaves a connection at one stream. FCM's 403
    /// is about one token (SENDER_ID_MISMATCH), and leaves the connection as it is.
    private let coldOn403: Bool

    package init(count: Int, pool: APNsConnectionPool, latency: CoreMetrics.Timer, baseURL: String, coldOn403: Bool = true) {
        self.coldOn403 = coldOn403
        let now = ContinuousClock.now
        state = Mutex(State(connections: Array(repeating: 0, count: count), startedAt: Array(repeating: now, count: count)))
        self.pool = pool
        self.latency = latency
        self.baseURL = baseURL
    }

    /// Records which connection the slots go out on, just before they are handed to it.
    package func assign(_ slots: some Collection<Int>, to connection: Int) {
        let now = ContinuousClock.now
        state.withLock { state in
            state.inFlight += slots.count
            for slot in slots {
                state.connections[slot] = connection
                state.startedAt[slot] = now
            }
        }
    }

    /// The answer for `slot`; called exactly once per hand-over, from any thread.
    func complete(_ slot: Int, _ outcome: APNsExchangeOutcome) {
        let now = ContinuousClock.now
        let (connection, startedAt, waiter) = state.withLock { state in
            state.ready.append((slot, outcome))
            state.inFlight -= 1
            var waiter: UnsafeContinuation<Void, Never>?
            if state.waveDue { swap(&waiter, &state.waiter) }
            return (state.connections[slot], state.startedAt[slot], waiter)
        }
        latency.record(duration: now - startedAt)
        // APNs raises a connection's stream limit once it has accepted the credentials; a 403
        // (or no answer at all) leaves the connection at one stream.
        if case .response(let status, _, _, _, _, _) = outcome, status != 403 || !coldOn403 {
            pool.release(connection, answered: true)
        } else {
            pool.release(connection, answered: false)
        }
        waiter?.resume()
    }

    /// The answers that came since the last wave, once a wave is due. Only one task waits.
    package func nextWave() async -> [(Int, APNsExchangeOutcome)] {
        await withUnsafeContinuation { (waiter: UnsafeContinuation<Void, Never>) in
            let due = state.withLock { state in
                if state.waveDue { return true }
                state.waiter = waiter
                return false
            }
            if due { waiter.resume() }
        }
        return state.withLock { state in
            var wave: [(Int, APNsExchangeOutcome)] = []
            swap(&wave, &state.ready)
            return wave
        }
    }
}
