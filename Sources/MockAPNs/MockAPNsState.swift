import APNs
import Foundation
import Synchronization

/// Everything the event loops share: the record of accepted notifications, fault budgets and
/// counters. One lock; the mock is a test tool, not a hot path.
final class MockAPNsState: Sendable {
    private struct State {
        var recorded: [RecordedNotification] = []
        var faults: [MockAPNsFault]
        var unregistered: [String: Date]
        var requests = 0
        var inFlight = 0
        var peakInFlight = 0
        var connections = 0
        var errors: [String] = []
    }

    private let state: Mutex<State>

    init(configuration: MockAPNsConfiguration) {
        state = Mutex(State(faults: configuration.faults, unregistered: configuration.unregisteredTokens))
    }

    func record(_ notification: RecordedNotification) {
        state.withLock { $0.recorded.append(notification) }
    }

    var recorded: [RecordedNotification] { state.withLock { $0.recorded } }

    func clearRecorded() { state.withLock { $0.recorded.removeAll() } }

    func requestArrived() {
        state.withLock { state in
            state.requests += 1
            state.inFlight += 1
            state.peakInFlight = max(state.peakInFlight, state.inFlight)
        }
    }

    func requestFinished() { state.withLock { $0.inFlight -= 1 } }

    /// The most requests open at once across all connections.
    var peakInFlight: Int { state.withLock { $0.peakInFlight } }

    var requests: Int { state.withLock { $0.requests } }

    func newConnectionNumber() -> Int {
        state.withLock { state in
            state.connections += 1
            return state.connections
        }
    }

    var connections: Int { state.withLock { $0.connections } }

    func recordError(_ error: String) { state.withLock { if $0.errors.count < 1000 { $0.errors.append(error) } } }

    var errors: [String] { state.withLock { $0.errors } }

    /// When APNs last knew the token valid: never later than the request (a date in the future
    /// means "became invalid just now", whenever it is asked).
    func unregisteredSince(_ token: String) -> Date? { state.withLock { $0.unregistered[token] }.map { min($0, Date()) } }

    func setUnregistered(_ token: String, since: Date?) { state.withLock { $0.unregistered[token] = since } }

    func setFaults(_ faults: [MockAPNsFault]) { state.withLock { $0.faults = faults } }

    /// The faults that fire for this request, spending one of each one's budget.
    func firingFaults(token: String, where matches: (MockAPNsFault.Action) -> Bool) -> [MockAPNsFault.Action] {
        state.withLock { state in
            var fired: [MockAPNsFault.Action] = []
            for index in state.faults.indices {
                let fault = state.faults[index]
                guard matches(fault.action), fault.tokens?.contains(token) ?? true, fault.times.map({ $0 > 0 }) ?? true else { continue }
                if let times = fault.times { state.faults[index].times = times - 1 }
                fired.append(fault.action)
            }
            return fired
        }
    }
}
