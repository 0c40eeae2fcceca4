import AMQP
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// Workers agree on one provider token per key over the broker: APNs sees one token, however many
/// workers run, start at once, die or join.
@Suite("pushworker run: one provider token for the fleet", .usesBroker)
struct FleetTokenTests {
    static func token(_ index: Int) -> String { WorkerProcessTests.token(index) }

    @Test("three workers started at once present APNs one provider token; one killed mid-broadcast loses no device, and a worker started later adopts the same token")
    func oneTokenForTheFleet() async throws {
        let setup = try await WorkerProcessTests.setUp(faults: [MockAPNsFault(.latency(.milliseconds(20)))], extra: "chunk_size: 20")
        defer { Task { try? await setup.mock.shutdown() } }
        var workers = try (0..<3).map { _ in try RunningProgram.worker(config: setup.config) }
        for worker in workers { try await worker.waitForLog("worker started") }
        let topology = AMQPTopology(queues: [.durable("\(setup.prefix).results")])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(setup.prefix).results", topology: topology)
        func publish(_ job: String) async throws {
            try await publisher.publish(.toQueue("\(setup.prefix).jobs", body: Array(job.utf8), properties: AMQPProperties(persistent: true)))
        }
        func authorizations() -> Set<String> { Set(setup.mock.recorded.map { $0.headers["authorization"] ?? "none" }) }

        // A broadcast all three take chunks of; one of them is killed while it is under way.
        let count = 1_000
        let tokens = (0..<count).map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        try await publish(#"{"id": "fleet", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}, "results": "none"}"#)
        try await waitUntil("a quarter of the broadcast is sent", progress: { setup.mock.requestCount }) { setup.mock.requestCount >= count / 4 }
        #expect(try await workers[0].stop(signal: SIGKILL) != 0)
        // Every chunk's summary at least once (a killed worker's chunks come again).
        var chunks: Set<String> = []
        while chunks.count < count / 20 {
            let delivery = try await results.next(within: .seconds(60))
            try await delivery.ack()
            let summary = try JSONDecoder().decode(JobSummary.self, from: Data(delivery.body))
            if let chunk = summary.chunk { chunks.insert(chunk) }
        }
        #expect(Set(setup.mock.recorded.map(\.token)) == Set((0..<count).map(Self.token)), "every device reached")
        #expect(authorizations().count == 1, "\(authorizations().count) provider tokens reached APNs")

        // A newcomer asks the fleet and sends with the token it already uses.
        workers.append(try RunningProgram.worker(config: setup.config))
        try await workers[3].waitForLog("worker started")
        #expect(workers[3].log.contains("provider token adopted"), "\(workers[3].log)")
        let before = setup.mock.requestCount
        for index in 0..<12 {
            try await publish(#"{"id": "late-\#(index)", "audience": {"tokens": ["\#(Self.token(count + index))"]}, "payload": {"aps": {}}, "results": "none"}"#)
        }
        var late = 0
        while late < 12 {
            let delivery = try await results.next(within: .seconds(30))
            try await delivery.ack()
            if delivery.properties.correlationID?.hasPrefix("late-") == true { late += 1 }
        }
        #expect(setup.mock.requestCount >= before + 12)
        #expect(authorizations().count == 1, "\(authorizations().count) provider tokens reached APNs")
        for worker in workers[1...] { #expect(try await worker.stop() == 0, "\(worker.log)") }
        await results.close()
        await publisher.close()
    }
}
