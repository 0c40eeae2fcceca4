import CoreMetrics
import Synchronization

/// Timers of one name, one per set of dimension values, each made on first use and kept (see
/// `CounterFamily` for why a handle is not made per use).
final class TimerFamily<Key: Hashable & Sendable>: Sendable {
    private let label: String
    private let dimensions: @Sendable (Key) -> [(String, String)]
    private let timers = Mutex<[Key: CoreMetrics.Timer]>([:])

    init(_ label: String, dimensions: @escaping @Sendable (Key) -> [(String, String)]) {
        self.label = label
        self.dimensions = dimensions
    }

    func record(_ key: Key, _ duration: Duration) {
        let timer = timers.withLock { timers in
            if let existing = timers[key] { return existing }
            let made = CoreMetrics.Timer(label: label, dimensions: dimensions(key))
            timers[key] = made
            return made
        }
        timer.recordNanoseconds(Int64(duration / .nanoseconds(1)))
    }
}
