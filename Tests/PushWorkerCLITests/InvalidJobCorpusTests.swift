import AMQP
import Foundation
import TestSupport
import Testing

@Suite("pushworker run: the invalid-job corpus", .usesBroker)
struct InvalidJobCorpusTests {
    /// The corpus the decoder's unit tests use, read from the source tree.
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("PushWorkerTests/Fixtures/invalid-jobs")

    @Test("every invalid job lands in the dead letters with its code, and the worker keeps running")
    func corpusDeadLettered() async throws {
        let setup = try await WorkerProcessTests.setUp(faults: [])
        defer { Task { try? await setup.mock.shutdown() } }
        let prefix = setup.prefix
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let topology = AMQPTopology(queues: [.durable("\(prefix).results"), .durable("\(prefix).dead", quorum: true)])
        let publisher = try await TestBroker.publisher(topology: topology)
        let dead = try await TestBroker.consumer(queue: "\(prefix).dead", prefetch: 100, topology: topology)
        let results = try await TestBroker.consumer(queue: "\(prefix).results", topology: topology)

        let manifest = try String(contentsOf: Self.corpus.appendingPathComponent("manifest.tsv"), encoding: .utf8)
        var expected: [String: String] = [:]
        for line in manifest.split(separator: "\n") where !line.hasPrefix("#") {
            let columns = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            expected[columns[0]] = columns[1]
            let body = try Data(contentsOf: Self.corpus.appendingPathComponent(columns[0]))
            try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(body), properties: AMQPProperties(persistent: true, messageID: columns[0])))
        }
        #expect(expected.count >= 30)
        var seen: [String: String] = [:]
        while seen.count < expected.count {
            let letter = try await dead.next(within: .seconds(30))
            try await letter.ack()
            let id = letter.properties.messageID ?? "?"
            #expect(seen[id] == nil, "\(id) dead-lettered twice")
            seen[id] = letter.properties.headers?["x-pushworker-error"]?.stringValue
            #expect(letter.properties.headers?["x-pushworker-error-message"]?.stringValue?.isEmpty == false)
        }
        #expect(seen == expected)

        // Still running and still sending.
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(#"{"id": "after", "audience": {"tokens": ["\#(WorkerProcessTests.token(1))"]}, "payload": {"aps": {}}, "results": "none"}"#.utf8)))
        let summary = try await results.next(within: .seconds(20))
        try await summary.ack()
        #expect(summary.properties.correlationID == "after")
        // Replayed while still invalid: it comes back to the dead letters, its replays counted.
        await dead.close()
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(#"{"audience": {}, "payload": {}}"#.utf8), properties: AMQPProperties(messageID: "again")))
        var listed = ""
        let deadline = ContinuousClock.now + .seconds(20)
        while !listed.contains("again") && ContinuousClock.now < deadline {
            listed = try await Program.running(["dlq", "list", "--config", setup.config.path]).standardOutput
        }
        let replay = try await Program.running(["dlq", "replay", "--config", setup.config.path, "--all"])
        #expect(replay.standardOutput.contains("replayed 1"), "\(replay.standardOutput)\(replay.standardError)")
        let deadAgain = try await TestBroker.consumer(queue: "\(prefix).dead", topology: topology)
        defer { Task { await deadAgain.close() } }
        let again = try await deadAgain.next(within: .seconds(20))
        try await again.ack()
        #expect(again.properties.messageID == "again")
        #expect(again.properties.headers?["x-pushworker-replays"]?.intValue == 1)
        #expect(again.properties.headers?["x-pushworker-error"] == "empty_audience")

        #expect(try await worker.stop() == 0, "\(worker.log)")
        await results.close()
        await publisher.close()
    }
}
