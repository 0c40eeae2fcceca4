import CoreMetrics
import Synchronization

/// Counters of one name, one per set of dimension values, each made on first use and kept.
///
/// Making a swift-metrics handle goes through the backend's registry (a lock and the label text
/// rendered); a result per device would pay that a million times a job. Here a result costs a
/// dictionary lookup under an uncontended lock, and the increment is the backend's atomic add.
final class CounterFamily<Key: Hashable & Sendable>: Sendable {
    private let label: String
    private let dimensions: @Sendable (Key) -> [(String, String)]
    private let counters = Mutex<[Key: CoreMetrics.Counter]>([:])

    init(_ label: String, dimensions: @escaping @Sendable (Key) -> [(String, String)]) {
        self.label = label
        self.dimensions = dimensions
    }

    func increment(_ key: Key, by amount: Int = 1) {
        counter(key).increment(by: amount)
    }

    private func counter(_ key: Key) -> CoreMetrics.Counter {
        counters.withLock { counters in
            if let existing = counters[key] { return existing }
            let made = CoreMetrics.Counter(label: label, dimensions: dimensions(key))
            counters[key] = made
            return made
        }
    }
}
