import AMQP
import CommandLineSupport
import Foundation
import PushWorker

/// `bench e2e --schedule N`: N one-device jobs, each with a `send_at` spread evenly over
/// `--schedule-over` seconds starting `--schedule-lead` seconds on (time enough to publish them
/// all, so each is held before its time), and the release lag of each: from its `send_at` to its
/// summary on the results queue (held, released by the worker's releaser, sent, answered). Prints
/// p50, p99 and the worst, with the worker's CPU per job and its peak memory.
struct ScheduleBench {
    let publisher: AMQPPublisher
    let jobsQueue: String
    let count: Int
    let lead: Double
    let over: Double
    /// CPU seconds of the worker processes so far.
    let workersCPU: () -> Double

    func measure(results: inout AMQPConsumer.AsyncIterator, workerPID: Int32) async throws {
        let cpuBefore = workersCPU()
        let base = Date().timeIntervalSince1970 + lead
        var sendAt: [String: Double] = [:]
        sendAt.reserveCapacity(count)
        let publishStart = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                let at = base + over * Double(index) / Double(max(count - 1, 1))
                let id = "scheduled-\(index)"
                sendAt[id] = at
                let stamp = JobScheduler.rfc3339(Int64((at * 1000).rounded()))
                let body = #"{"id": "\#(id)", "send_at": "\#(stamp)", "audience": {"tokens": ["\#(String(format: "%064x", index + 1))"]}, "payload": {"aps": {}}, "results": "none"}"#
                if index >= 256 { try await group.next() }
                group.addTask { [publisher, jobsQueue] in
                    try await publisher.publish(.toQueue(jobsQueue, body: Array(body.utf8), properties: AMQPProperties(persistent: true)))
                }
            }
            try await group.waitForAll()
        }
        let publishSeconds = (ContinuousClock.now - publishStart) / .seconds(1)
        print(String(format: "published %d jobs in %.1f s; their send_at from %.0f s to %.0f s after the first publish", count, publishSeconds, lead, lead + over))
        if publishSeconds > lead { print("   (publishing took longer than --schedule-lead: the first jobs were due before they were held)") }
        var lags: [Double] = []
        lags.reserveCapacity(count)
        var held = 0, early = 0
        while lags.count < count {
            guard let delivery = try await results.next() else { throw CommandFailure("the results consumer stopped") }
            try await delivery.ack()
            guard delivery.properties.type == "summary", let id = delivery.properties.correlationID, let at = sendAt[id] else { continue }
            let summary = try JSONDecoder().decode(JobSummary.self, from: Data(delivery.body))
            if summary.scheduledFor != nil {
                held += 1
                continue
            }
            let lag = (Date().timeIntervalSince1970 - at) * 1000
            if lag < 0 { early += 1 }
            lags.append(lag)
        }
        let cpu = workersCPU() - cpuBefore
        lags.sort()
        func percentile(_ fraction: Double) -> Double { lags[min(lags.count - 1, Int(Double(lags.count) * fraction))] }
        print(String(format: "release lag, send_at to summary, %d jobs (%d held first): p50 %.0f ms, p99 %.0f ms (target < 1000), worst %.0f ms; sent before their send_at: %d",
            count, held, percentile(0.5), percentile(0.99), lags.last ?? 0, early))
        print(String(format: "worker CPU %.1f µs per job (hold, release and send); worker peak memory (VmHWM) %.1f MiB",
            cpu / Double(count) * 1e6, Double(PeakMemory.kibibytes(of: workerPID)) / 1024))
    }
}
