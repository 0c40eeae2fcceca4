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
) async throws -> (perDevice: [String: Int], chunks: Set<String>, jobs: Set<String>, resends: Int) {
    var perDevice: [String: Int] = [:]
    var resends = 0
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
            let result = try JSONDecoder().decode(PushResult.self, from: Data(delivery.body))
            perDevice[result.token, default: 0] += 1
            resends += max(0, result.attempts - 1)
        }
    }
    return (perDevice, summaries, jobs, resends)
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

/// What a producer read of a job in any results mode: each device's results, alone or packed in
/// `results` messages, and the summaries.
struct Replies {
    var perDevice: [String: Int] = [:]
    /// Results published alone (`all`, `failures`).
    var single = 0
    /// Each chunk's last summary, by its chunk ("whole" for a job sent whole).
    var lastSummaries: [String: JobSummary] = [:]
    /// Devices the summaries say were answered from the ledger.
    var fromLedger = 0
}

/// Reads until every one of `chunks` chunks has its summary (a chunk's results come before it).
/// Fails only when the replies stop coming: no new message for `stall`.
func collectReplies(from consumer: AMQPConsumer, chunks: Int, stall: Duration = .seconds(30)) async throws -> Replies {
    var replies = Replies()
    while replies.lastSummaries.count < chunks {
        let delivery: AMQPDelivery
        do {
            delivery = try await consumer.next(within: stall)
        } catch {
            throw TestFailure("no reply for \(stall): \(replies.perDevice.count) devices with results, \(replies.lastSummaries.count) of \(chunks) chunk summaries (\(error))")
        }
        try? await delivery.ack()
        switch delivery.properties.type {
        case "summary":
            let summary = try JSONDecoder().decode(JobSummary.self, from: Data(delivery.body))
            replies.lastSummaries[summary.chunk ?? "whole"] = summary
            replies.fromLedger += summary.fromLedger
        case "results":
            let object = try #require(try JSONSerialization.jsonObject(with: Data(delivery.body)) as? [String: Any])
            for entry in try #require(object["results"] as? [Any]) {
                let result = try JSONDecoder().decode(PushResult.self, from: JSONSerialization.data(withJSONObject: entry))
                replies.perDevice[result.token, default: 0] += 1
            }
        default:
            replies.single += 1
            replies.perDevice[try JSONDecoder().decode(PushResult.self, from: Data(delivery.body)).token, default: 0] += 1
        }
    }
    return replies
}
