import DequeModule
import Synchronization

/// Admits at most `limit` holders; the others wait in arrival order. Keeps a million-device send
/// from turning into a million buffered requests: `DeviceAdmission` is its one user, so that a
/// device waits here before a task (and its memory) exists for it.
///
/// `reserve` of the slots are kept for `.high` holders, which are also served before any `.normal`
/// waiter: a broadcast (normal) may fill all the others and queue for more, and a one-device job
/// (high) still finds a slot at once instead of waiting behind it. So that a steady stream of high
/// holders cannot starve the normal ones, every `normalShare`-th slot handed to a waiter while both
/// kinds wait goes to a normal one.
final class AsyncSemaphore: Sendable {
    enum Priority: Sendable {
        /// May take any free slot, reserved ones too, and goes ahead of normal waiters.
        case high
        /// May take only slots beyond the reserve.
        case normal
    }

    private struct State {
        var available: Int
        let reserve: Int
        /// Continuations waiting, each kind in arrival order.
        var high = Deque<CheckedContinuation<Void, Never>>()
        var normal = Deque<CheckedContinuation<Void, Never>>()
        /// Slots handed to high waiters in a row while normal ones waited.
        var highInARow = 0

        /// Whether a holder of `priority` may take a slot now without going ahead of a waiter
        /// that has the same or a higher claim.
        func admits(_ priority: Priority) -> Bool {
            switch priority {
            case .high: available > 0 && high.isEmpty
            case .normal: available > reserve && high.isEmpty && normal.isEmpty
            }
        }
    }

    private let state: Mutex<State>
    /// While both kinds wait, one slot in this many goes to a normal waiter.
    static let normalShare = 8

    /// - Parameter reserve: slots only `.high` holders take; at most `limit - 1`.
    init(limit: Int, reserve: Int = 0) {
        state = Mutex(State(available: limit, reserve: max(0, min(reserve, limit - 1))))
    }

    func acquire(_ priority: Priority = .normal) async {
        if tryAcquire(priority) { return }
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.admits(priority) {
                    state.available -= 1
                    return true
                }
                switch priority {
                case .high: state.high.append(continuation)
                case .normal: state.normal.append(continuation)
                }
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Takes a slot only if one is free now for `priority` (never ahead of a waiter with the same
    /// or a higher claim); for a caller that adds to what it already holds without waiting for more.
    func tryAcquire(_ priority: Priority = .normal) -> Bool {
        state.withLock { state in
            guard state.admits(priority) else { return false }
            state.available -= 1
            return true
        }
    }

    /// Whether a slot given back now would go to a waiter at once (as `release` decides).
    var hasWaiters: Bool {
        state.withLock { !$0.high.isEmpty || (!$0.normal.isEmpty && $0.available >= $0.reserve) }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if !state.high.isEmpty {
                if state.normal.isEmpty || state.highInARow < Self.normalShare - 1 {
                    if !state.normal.isEmpty { state.highInARow += 1 }
                    return state.high.removeFirst()
                }
                state.highInARow = 0
                return state.normal.removeFirst()
            }
            state.highInARow = 0
            if !state.normal.isEmpty && state.available >= state.reserve { return state.normal.removeFirst() }
            state.available += 1
            return nil
        }
        next?.resume()
    }
}
