import AMQP
import Foundation
import TestSupport
import Testing

/// Collects results until every device has one and every chunk has its summary: the results
/// per token, the chunk names of the summaries, and the job ids (correlation ids) seen.
func collectResults(
    from results: AMQPConsumer, devices: Int, chunks: Int, within limit: Duration = .seconds(120)
) async throws -> (perDevice: [String: Int], chunks: Set<String>, jobs: Set<String>) {
    var perDevice: [String: Int] = [:]
    var summaries = Set<String>()
    var jobs = Set<String>()
    let deadline = ContinuousClock.now + limit
    while perDevice.count < devices || summaries.count < chunks {
        guard ContinuousClock.now < deadline else {
            throw TestFailure("after \(limit): \(perDevice.count) of \(devices) devices, \(summaries.count) of \(chunks) chunk summaries")
        }
        let delivery = try await results.next(within: .seconds(60))
        // After a broker restart the test's own consumer reconnects too: a stale ack just means
        // the result comes again.
        try? await delivery.ack()
        jobs.insert(delivery.properties.correlationID ?? "")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(delivery.body)) as? [String: Any])
        if delivery.properties.type == "summary" {
            summaries.insert(object["chunk"] as? String ?? "whole")
        } else {
            perDevice[object["token"] as? String ?? "", default: 0] += 1
        }
    }
    return (perDevice, summaries, jobs)
}
