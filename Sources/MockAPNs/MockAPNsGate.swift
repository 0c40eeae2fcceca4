import Synchronization

/// A gate a `held` fault's answers wait behind until a test opens it: an order ("these answers
/// reach the client before that one") checked by what the client has seen, not by a latency that
/// a busy machine may outlast.
public final class MockAPNsGate: Sendable {
    private let state = Mutex<(open: Bool, waiting: [@Sendable () -> Void])>((false, []))

    public init() {}

    /// Lets every answer held behind the gate go, and every later one at once.
    public func open() {
        let waiting = state.withLock { state -> [@Sendable () -> Void] in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for answer in waiting { answer() }
    }

    /// Runs `answer` once the gate is open (now, if it is).
    func whenOpen(_ answer: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.open { return true }
            state.waiting.append(answer)
            return false
        }
        if now { answer() }
    }
}
