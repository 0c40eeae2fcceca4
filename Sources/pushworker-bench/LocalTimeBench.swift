import AMQP
import CommandLineSupport
import Foundation
import PushWorker

/// `bench e2e --group --local-time`: one job to the registry group of `count` members with a
/// `local_time` a minute or two ahead (the app's zone, UTC, for every member): how long the
/// worker takes to read the audience and hold it as parts, its peak memory then (the audience is
/// never held whole: at most one part per instant), and the rate from the parts' release to the
/// last result.
struct LocalTimeBench {
    let publisher: AMQPPublisher
    let jobsQueue: String
    let count: Int
    let workerPID: Int32
    /// CPU seconds of the worker processes so far.
    let workersCPU: () -> Double

    func measure(results: inout AMQPConsumer.AsyncIterator) async throws {
        // The next whole minute at least 60 s ahead, in UTC (the app's zone here).
        let target = (Date().timeIntervalSince1970 / 60).rounded(.up) * 60 + 60
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.hour, .minute], from: Date(timeIntervalSince1970: target))
        let clock = String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
        let body = #"{"id": "bench-local", "local_time": "\#(clock)", "results": "batched", "audience": {"groups": ["all"]}, "payload": {"aps": {"alert": "good morning"}}}"#
        let cpuBefore = workersCPU()
        let start = ContinuousClock.now
        try await publisher.publish(.toQueue(jobsQueue, body: Array(body.utf8), properties: AMQPProperties(persistent: true)))
        var final = 0, delivered = 0
        var heldAfter: Double?, heldMemory = 0.0, heldCPU = 0.0
        var firstPart: ContinuousClock.Instant?
        let decoder = JSONDecoder()
        while final < count {
            guard let delivery = try await results.next() else { throw CommandFailure("the results consumer stopped") }
            try await delivery.ack()
            guard delivery.properties.type == "summary" else { continue }
            let summary = try decoder.decode(JobSummary.self, from: Data(delivery.body))
            if summary.scheduledFor != nil {
                heldAfter = (ContinuousClock.now - start) / .seconds(1)
                heldMemory = Double(PeakMemory.kibibytes(of: workerPID)) / 1024
                heldCPU = workersCPU() - cpuBefore
                print(String(format: "held: %d devices (local_time %@ UTC, first instant %@) read and held by zone in %.1f s, worker CPU %.1f µs per device, peak memory so far %.1f MiB",
                    summary.deferred, clock, summary.scheduledFor ?? "-", heldAfter ?? 0, heldCPU / Double(count) * 1e6, heldMemory))
                continue
            }
            if firstPart == nil { firstPart = .now }
            final += summary.outcomes.values.reduce(0, +)
            delivered += summary.outcomes[.delivered] ?? 0
        }
        let sending = (ContinuousClock.now - (firstPart ?? .now)) / .seconds(1)
        let lag = (firstPart.map { _ in Date().timeIntervalSince1970 - sending - target } ?? 0)
        print(String(format: "released: first part's summary %.1f s after %@, %d delivered in %.1f s = %.0f devices/s; worker CPU %.1f µs per device in all; peak memory %.1f MiB",
            lag, clock, delivered, sending, Double(delivered) / max(sending, 0.001), (workersCPU() - cpuBefore) / Double(count) * 1e6,
            Double(PeakMemory.kibibytes(of: workerPID)) / 1024))
    }
}
