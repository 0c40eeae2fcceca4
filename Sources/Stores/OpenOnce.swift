import Synchronization

/// A door that opens once: whoever waits before then waits, whoever comes after passes. The
/// registry service's channel requests wait at it for the worker's provider tokens to be agreed
/// on, so that they never present APNs a token of their own signed in the meantime; tests hold a
/// stand-in's step (a write, a lookup) at one while they arrange what happens meanwhile.
public final class OpenOnce: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    public init(open: Bool = false) {
        state.withLock { $0.open = open }
    }

    public func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    public func wait() async {
        await withCheckedContinuation { continuation in
            let passes = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if passes { continuation.resume() }
        }
    }
}

