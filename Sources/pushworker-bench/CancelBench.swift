import AMQP
import CommandLineSupport
import Foundation
import Logging
import PushWorker
import Stores

/// `bench e2e --cancel-after N`: one job of `--count` devices (`results: all`, so each device's
/// result is seen as it comes), cancelled in the store — as `pushworker schedule cancel` and
/// `cancel_job` do — once N devices have their result. Prints how many devices were delivered
/// after the cancel was confirmed, at most: those delivered in all, less the results already read
/// when the cancel returned (a result read late counts as sent late, so this is an upper bound).
struct CancelBench {
    let publisher: AMQPPublisher
    let jobsQueue: String
    let count: Int
    let cancelAfter: Int
    let configurationFile: String
    let chunkSize: Int

    func measure(results: inout AMQPConsumer.AsyncIterator, body: [UInt8]) async throws {
        var logger = Logger(label: "pushworker-bench.cancel")
        logger.logLevel = .warning
        guard let scheduler = try await WorkerPlan.load(file: configurationFile).openScheduler(logger: logger) else {
            throw CommandFailure("--cancel-after needs a ledger (--ledger sqlite or postgres)")
        }
        let start = ContinuousClock.now
        try await publisher.publish(.toQueue(jobsQueue, body: body, properties: AMQPProperties(persistent: true)))
        var seen = 0, final = 0, delivered = 0, cancelled = 0
        var seenAtCancel: Int?
        var cancelTook: Duration = .zero
        let decoder = JSONDecoder()
        while final < count {
            guard let delivery = try await results.next() else { throw CommandFailure("the results consumer stopped") }
            try await delivery.ack()
            if delivery.properties.type == "summary" {
                let summary = try decoder.decode(JobSummary.self, from: Data(delivery.body))
                final += summary.outcomes.values.reduce(0, +)
                delivered += summary.outcomes[.delivered] ?? 0
                cancelled += summary.outcomes[.cancelled] ?? 0
                continue
            }
            seen += 1
            if seenAtCancel == nil, seen >= cancelAfter {
                let asked = ContinuousClock.now
                _ = try await scheduler.cancel(HeldJobName(.job("bench")))
                cancelTook = ContinuousClock.now - asked
                seenAtCancel = seen
            }
        }
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        let after = delivered - (seenAtCancel ?? delivered)
        print(String(format: "a %d-device job cancelled after %d results (the cancel took %.1f ms): %d delivered, %d cancelled, in %.1f s",
            count, seenAtCancel ?? 0, Double(cancelTook / .microseconds(1)) / 1000, delivered, cancelled, seconds))
        print("delivered after the cancel returned, at most: \(after) devices (target: at most one chunk, \(chunkSize), per worker)")
    }
}
