import Foundation

/// The load both client benchmarks put on their client: enough senders to keep every stream
/// busy, each sending batches of `batch` and waiting for all of each; the wall time, this
/// process's CPU time (what the client spent, whatever the server's speed), the failures and the
/// latency of each batch (its send to its last answer).
struct ClientLoad {
    let count: Int
    let inFlight: Int
    let batch: Int

    struct Measure {
        let seconds: Double
        let cpu: Double
        let failures: Int
        let histogram: LatencyHistogram
        let batchSize: Int
    }

    /// `send(size)` sends one batch of `size` and returns how many of it failed.
    func run(_ send: @escaping @Sendable (Int) async -> Int) async -> Measure {
        let histogram = LatencyHistogram()
        let batchSize = max(1, min(batch, min(inFlight, count)))
        let senders = max(1, min(inFlight, count) / batchSize)
        let (count, start, cpuBefore) = (count, ContinuousClock.now, CPUTime.now)
        let failures = await withTaskGroup(of: Int.self) { group in
            for sender in 0..<senders {
                group.addTask {
                    var failures = 0
                    // This sender's share of `count`, in batches.
                    var left = count / senders + (sender < count % senders ? 1 : 0)
                    while left > 0 {
                        let size = min(batchSize, left)
                        left -= size
                        let sent = ContinuousClock.now
                        failures += await send(size)
                        histogram.record(ContinuousClock.now - sent, count: size)
                    }
                    return failures
                }
            }
            return await group.reduce(0, +)
        }
        return Measure(
            seconds: (ContinuousClock.now - start) / .seconds(1), cpu: CPUTime.now - cpuBefore, failures: failures, histogram: histogram, batchSize: batchSize)
    }

    /// The latency and memory line both print.
    static func latencyLine(_ histogram: LatencyHistogram) -> String {
        String(format: "latency (a batch's send to its last answer) p50 %.2f ms, p99 %.2f ms; peak memory (VmHWM) %.1f MiB",
            histogram.percentile(0.5), histogram.percentile(0.99), Double(PeakMemory.kibibytes) / 1024)
    }
}
