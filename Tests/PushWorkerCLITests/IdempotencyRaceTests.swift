import AMQP
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// Two worker processes on one SQLite ledger file, as on a host running several workers, each
/// handed one of two jobs with the same idempotency key at the same moment. SQLite's file lock
/// decides between the processes: a claim that read the key, then wrote it, in two steps would let
/// both jobs send. (In one process every claim goes through the ledger's one serial queue, which
/// cannot show that.)
@Suite("pushworker run: an idempotency key raced by two worker processes on one SQLite file", .heavy, .usesBroker)
struct IdempotencyRaceTests {
    static let keys = 30

    static func job(_ id: String, key: Int) -> [UInt8] {
        Array(#"{"id": "\#(id)", "idempotency_key": "race-\#(key)", "audience": {"tokens": ["\#(WorkerProcessTests.token(key))"]}, "payload": {"aps": {}}}"#.utf8)
    }

    /// Reads `count` summaries from a worker's reply queue, by job id (results are skipped).
    static func summaries(_ count: Int, from consumer: AMQPConsumer) async throws -> [String: JobSummary] {
        var found: [String: JobSummary] = [:]
        while found.count < count {
            let delivery = try await consumer.next(within: .seconds(30))
            try await delivery.ack()
            if let summary = try Reply(delivery).summary { found[summary.jobID] = summary }
        }
        return found
    }

    @Test("thirty keys, each published to two workers at once: each key's device is pushed once, and the other job's summary names the one that sent")
    func race() async throws {
        let ledger = FileManager.default.temporaryDirectory.appendingPathComponent("race-\(UUID().uuidString.prefix(8)).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: ledger + suffix) } }
        let sides = [
            try await WorkerProcessTests.setUp(faults: [], extra: "ledger: {sqlite: \(ledger)}"),
            try await WorkerProcessTests.setUp(faults: [], extra: "ledger: {sqlite: \(ledger)}"),
        ]
        let workers = try sides.map { try RunningProgram.worker(config: $0.config) }
        for worker in workers { try await worker.waitForLog("worker started") }
        let topology = AMQPTopology(queues: sides.map { .durable("\($0.prefix).results") })
        let publisher = try await TestBroker.publisher(topology: topology)
        let consumers = [
            try await TestBroker.consumer(queue: "\(sides[0].prefix).results", prefetch: 100, topology: topology),
            try await TestBroker.consumer(queue: "\(sides[1].prefix).results", prefetch: 100, topology: topology),
        ]
        for key in 0..<Self.keys {
            try await publisher.publish(.toQueue("\(sides[0].prefix).jobs", body: Self.job("a-\(key)", key: key)))
            try await publisher.publish(.toQueue("\(sides[1].prefix).jobs", body: Self.job("b-\(key)", key: key)))
        }
        let a = try await Self.summaries(Self.keys, from: consumers[0])
        let b = try await Self.summaries(Self.keys, from: consumers[1])
        for key in 0..<Self.keys {
            let pair = [try #require(a["a-\(key)"]), try #require(b["b-\(key)"])]
            let sent = pair.filter { $0.duplicateOf == nil }
            #expect(sent.count == 1, "key race-\(key): \(pair)")
            #expect(pair.filter { $0.duplicateOf != nil }.map(\.duplicateOf) == sent.map(\.jobID), "key race-\(key): \(pair)")
        }
        let pushes = Dictionary(grouping: sides.flatMap(\.mock.recorded), by: \.token).mapValues(\.count)
        #expect(pushes.count == Self.keys && pushes.values.allSatisfy { $0 == 1 }, "\(pushes)")
        print("idempotency race on one SQLite file: worker A sent \(a.values.count { $0.duplicateOf == nil }) keys, worker B \(b.values.count { $0.duplicateOf == nil })")
        for worker in workers { #expect(try await worker.stop() == 0, "\(worker.log)") }
        for consumer in consumers { await consumer.close() }
        await publisher.close()
        for side in sides { try? await side.mock.shutdown() }
    }
}
