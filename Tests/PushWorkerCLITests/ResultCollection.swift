import AMQP
import Foundation
import PushWorker
import TestSupport
import Testing

/// Collects results until every device has one and every chunk has its summary: the results
/// per token, the chunk names of the summaries, and the job ids (correlation ids) seen.
///
/// It fails only when the results stop coming: no new message for `stall`. A slow but moving job
/// on a loaded two-core machine passes; a stuck one fails, saying how far it got.
func collectResults(
    from results: AMQPConsumer, devices: Int, chunks: Int, stall: Duration = .seconds(30)
) async throws -> (perDevice: [String: Int], chunks: Set<String>, jobs: Set<String>) {
    var perDevice: [String: Int] = [:]
    var summaries = Set<String>()
    var jobs = Set<String>()
    let start = ContinuousClock.now
    while perDevice.count < devices || summaries.count < chunks {
        let delivery: AMQPDelivery
        do {
            delivery = try await results.next(within: stall)
        } catch {
            throw TestFailure(
                "no result for \(stall) after \(ContinuousClock.now - start): \(perDevice.count) of \(devices) devices, \(summaries.count) of \(chunks) chunk summaries (\(error))")
        }
        // After a broker restart the test's own consumer reconnects too: a stale ack just means
        // the result comes again.
        try? await delivery.ack()
        jobs.insert(delivery.properties.correlationID ?? "")
        if delivery.properties.type == "summary" {
            summaries.insert(try JSONDecoder().decode(JobSummary.self, from: Data(delivery.body)).chunk ?? "whole")
        } else {
            perDevice[try JSONDecoder().decode(PushResult.self, from: Data(delivery.body)).token, default: 0] += 1
        }
    }
    return (perDevice, summaries, jobs)
}

/// A message on a reply queue, read with the worker's own types: a device's result, or a summary.
enum Reply {
    case result(PushResult)
    case summary(JobSummary)

    init(_ delivery: AMQPDelivery) throws {
        if delivery.properties.type == "summary" {
            self = .summary(try JSONDecoder().decode(JobSummary.self, from: Data(delivery.body)))
        } else {
            self = .result(try JSONDecoder().decode(PushResult.self, from: Data(delivery.body)))
        }
    }

    var result: PushResult? { if case .result(let result) = self { result } else { nil } }
    var summary: JobSummary? { if case .summary(let summary) = self { summary } else { nil } }
}
