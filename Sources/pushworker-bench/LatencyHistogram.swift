import Foundation
import Synchronization

/// Latencies in logarithmic buckets (1% apart, 1 µs to 100 s): a few kilobytes whatever the count.
final class LatencyHistogram: Sendable {
    private static let growth = 1.01
    private let buckets = Mutex([Int](repeating: 0, count: Int(log(1e8) / log(growth)) + 2))

    /// `count` samples of the same duration (a batch's notifications).
    func record(_ duration: Duration, count: Int = 1) {
        let micros = max(duration / .microseconds(1), 1)
        let index = Int(log(micros) / log(Self.growth))
        buckets.withLock { $0[min(index, $0.count - 1)] += count }
    }

    /// Milliseconds: the upper edge of the bucket holding the percentile.
    func percentile(_ fraction: Double) -> Double {
        buckets.withLock { buckets in
            let total = buckets.reduce(0, +)
            var seen = 0
            for (index, count) in buckets.enumerated() {
                seen += count
                if Double(seen) >= fraction * Double(total) { return pow(Self.growth, Double(index + 1)) / 1000 }
            }
            return 0
        }
    }
}
