import AMQP
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// The two lanes through a worker process: a one-device job published while a broadcast's chunks
/// fill the bulk queue is taken and sent at once, and the broadcast still reaches every device once.
@Suite("pushworker run: the now lane and the bulk lane", .usesBroker)
struct LaneTests {
    static func token(_ index: Int) -> String { WorkerProcessTests.token(index) }

    @Test("a one-device job published during a broadcast comes back before the broadcast's next chunks; every device of both is sent once")
    func smallJobOvertakesBroadcast() async throws {
        // 2,000 devices in chunks of 10, every answer 60 ms late, 20 slots of which the now lane
        // keeps 2: the broadcast lasts at least 6.7 s whatever the machine. With one lane, the
        // small job would wait behind all of its chunks.
        let running = try await JobContractTests.Running.start(
            faults: [MockAPNsFault(.latency(.milliseconds(60)))], extra: "chunk_size: 10", appExtra: ["max_in_flight: 20"])
        let count = 2_000
        let tokens = (0..<count).map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        try await running.publish(#"{"id": "broadcast", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}, "results": "none"}"#)

        // Once the first chunk is done, every chunk is on the bulk queue: the split is confirmed
        // before the original is acknowledged, and chunks are consumed as they are published.
        var chunksDone = 0, devicesDone = 0
        func broadcastSummary(_ reply: (result: PushResult?, summary: JobSummary?, delivery: AMQPDelivery)) throws {
            let summary = try #require(reply.summary, "a result of a job that asked for none")
            #expect(summary.jobID == "broadcast" && summary.chunk != nil)
            chunksDone += 1
            devicesDone += summary.devices
        }
        try broadcastSummary(try await JobContractTests.Running.reply(from: running.results))

        // Where the broadcast stands when the small job is published (a loaded machine may have
        // kept this test from reading the first summary for a while): its devices APNs has seen.
        let sentBefore = running.mock.requestCount
        try await running.publish(#"{"id": "small", "audience": {"tokens": ["\#(Self.token(count))"]}, "payload": {"aps": {}}, "results": "none"}"#)
        var chunksBefore: Int?
        while chunksBefore == nil || devicesDone < count {
            let reply = try await JobContractTests.Running.reply(from: running.results)
            if reply.summary?.jobID == "small" {
                #expect(reply.summary?.outcomes == [.delivered: 1])
                chunksBefore = chunksDone
            } else {
                try broadcastSummary(reply)
            }
        }
        let overtaken = try #require(chunksBefore)
        #expect(chunksDone == count / 10)
        // Of the chunks still to finish when it was published, those finished before it are at
        // most the ones in hand and just finishing: most of the rest come after it. With one lane
        // it would come after all of them.
        let doneAtPublish = sentBefore / 10
        let remaining = chunksDone - doneAtPublish
        print("lanes: the small job was published with \(sentBefore) of \(count) broadcast devices sent and came back after \(overtaken) of \(chunksDone) chunks")
        #expect(remaining >= 20, "the broadcast was nearly over (\(sentBefore) of \(count) devices sent) before the small job could be published: nothing to judge")
        #expect(overtaken - doneAtPublish < remaining / 2,
                "the small job came back after \(overtaken) of \(chunksDone) chunks, \(doneAtPublish) of them done when it was published")
        let counts = running.mock.deliveryCounts
        #expect(counts.count == count + 1 && counts.values.allSatisfy { $0 == 1 })
        try await running.stop()
    }
}
