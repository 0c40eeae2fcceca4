import AMQP
import CommandLineSupport
import Foundation
import PushWorker
import Synchronization

/// `bench e2e --lanes`: a broadcast alone, then the same broadcast with one-device jobs published
/// at a steady pace while it runs, then alone again. Prints how long each one-device job took from
/// publish to its summary (p50, p99, the worst) and the broadcast's rate with them beside its rate
/// alone, with the worker's CPU per device, so a lane that starves the other shows either way.
struct LaneBench {
    let publisher: AMQPPublisher
    let jobsQueue: String
    let count: Int
    let interval: Duration
    /// CPU seconds of the worker processes so far.
    let workersCPU: () -> Double

    /// The broadcast: `results: failures`, as a marketing send asks for, so the results queue
    /// carries the summaries and no per-device message.
    private func broadcastBody(id: String) -> [UInt8] {
        var body = #"{"id": "\#(id)", "results": "failures", "audience": {"tokens": ["#
        body.reserveCapacity(count * 67 + 100)
        for index in 0..<count {
            if index > 0 { body += "," }
            body += "\"" + SyntheticRegistry.token(index) + "\""
        }
        body += #"]}, "payload": {"aps": {"alert": "broadcast"}}}"#
        return Array(body.utf8)
    }

    struct Run {
        var seconds: Double
        var cpuPerDevice: Double
        var latencies: [Double] = []
    }

    /// One broadcast, with one-device jobs every `interval` while it runs when `withSmallJobs`.
    func run(_ label: String, withSmallJobs: Bool, results: inout AMQPConsumer.AsyncIterator) async throws -> Run {
        let body = broadcastBody(id: label)
        let cpuBefore = workersCPU()
        let start = ContinuousClock.now
        try await publisher.publish(.toQueue(jobsQueue, body: body, properties: AMQPProperties(persistent: true)))
        let sentAt = Mutex<[String: ContinuousClock.Instant]>([:])
        // Stopped by a flag, not by cancellation, which would cut a publish short.
        let stop = Atomic<Bool>(false)
        let pacer: Task<Int, Error>? = withSmallJobs ? Task { [publisher, jobsQueue, interval] in
            var index = 0
            while true {
                try await Task.sleep(for: interval)
                if stop.load(ordering: .relaxed) { break }
                let id = "\(label)-one-\(index)"
                sentAt.withLock { $0[id] = .now }
                try await publisher.publish(.toQueue(jobsQueue, body: Array(E2EBenchCommand.oneDeviceJob(id: id, index: index).utf8)))
                index += 1
            }
            return index
        } : nil
        var devices = 0
        var broadcastEnd: ContinuousClock.Instant?
        var latencies: [Double] = []
        var published: Int?
        while broadcastEnd == nil || (published.map { latencies.count < $0 } ?? false) {
            guard let delivery = try await results.next() else { throw CommandFailure("the results consumer stopped") }
            try await delivery.ack()
            let id = delivery.properties.correlationID ?? ""
            if id == label {
                guard delivery.properties.type == "summary" else { continue }  // a failure's result
                devices += try JSONDecoder().decode(JobSummary.self, from: Data(delivery.body)).devices
                if devices >= count {
                    broadcastEnd = .now
                    stop.store(true, ordering: .relaxed)
                    published = try await pacer?.value ?? 0
                }
            } else if let sent = sentAt.withLock({ $0[id] }) {
                latencies.append((ContinuousClock.now - sent) / .milliseconds(1))
            }
        }
        let seconds = (broadcastEnd! - start) / .seconds(1)
        return Run(seconds: seconds, cpuPerDevice: (workersCPU() - cpuBefore) / Double(count) * 1e6, latencies: latencies.sorted())
    }

    func measure(results: inout AMQPConsumer.AsyncIterator) async throws {
        let before = try await run("alone-1", withSmallJobs: false, results: &results)
        report("broadcast alone", before)
        let mixed = try await run("mixed", withSmallJobs: true, results: &results)
        report("broadcast with one-device jobs every \(interval)", mixed)
        let after = try await run("alone-2", withSmallJobs: false, results: &results)
        report("broadcast alone, again", after)
        let latencies = mixed.latencies
        guard !latencies.isEmpty else {
            print("no one-device job was published during the broadcast: make it longer (--count)")
            return
        }
        let p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        let over = latencies.count { $0 > 250 }
        print(String(format: "one-device jobs during the broadcast: %d, publish to summary p50 %.1f ms, p99 %.1f ms (target < 100), worst %.1f ms; over 250 ms: %d (target 0)",
            latencies.count, latencies[latencies.count / 2], p99, latencies.last!, over))
        let alone = (before.seconds + after.seconds) / 2
        print(String(format: "broadcast devices/s with them / alone (mean of the two): %.3f (target >= 0.90)", alone / mixed.seconds))
    }

    private func report(_ label: String, _ run: Run) {
        print(String(format: "%@: %d devices in %.2f s = %.0f devices/s (worker CPU %.1f µs per device)",
            label, count, run.seconds, Double(count) / run.seconds, run.cpuPerDevice))
    }
}
