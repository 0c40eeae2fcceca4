import Synchronization

/// Holds whoever passes it until the test opens it: a stand-in's step (a write, a query) kept
/// waiting while the test arranges what should happen meanwhile. Once open, it stays open.
public final class TestGate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    public init(open: Bool = false) {
        state.withLock { $0.open = open }
    }

    public func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns at once when open, else once `open()` is called.
    public func pass() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
