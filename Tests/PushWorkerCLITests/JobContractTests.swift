import AMQP
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

/// The job contract as a producer meets it, through the worker process and the mock's record:
/// what reaches APNs, where summaries go, and what happens to jobs the worker cannot serve.
@Suite("pushworker run: the job contract as producers see it", .usesBroker)
struct JobContractTests {
    static func token(_ index: Int) -> String { WorkerProcessTests.token(index) }

    /// A worker on its own queues, with a publisher and consumers of its results and dead letters.
    struct Running {
        let setup: WorkerProcessTests.Setup
        let worker: RunningProgram
        let publisher: AMQPPublisher
        let results: AMQPConsumer
        let dead: AMQPConsumer
        var prefix: String { setup.prefix }
        var mock: MockAPNsServer { setup.mock }

        static func start(faults: [MockAPNsFault] = [], extra: String = "", appExtra: [String] = []) async throws -> Running {
            try await start(setup: try await WorkerProcessTests.setUp(faults: faults, extra: extra, appExtra: appExtra))
        }

        /// A worker on `setup`'s mock and configuration.
        static func start(setup: WorkerProcessTests.Setup) async throws -> Running {
            let worker = try RunningProgram.worker(config: setup.config)
            try await worker.waitForLog("worker started")
            let topology = AMQPTopology(queues: [.durable("\(setup.prefix).results"), .durable("\(setup.prefix).dead", quorum: true)])
            return Running(
                setup: setup, worker: worker, publisher: try await TestBroker.publisher(topology: topology),
                results: try await TestBroker.consumer(queue: "\(setup.prefix).results", topology: topology),
                dead: try await TestBroker.consumer(queue: "\(setup.prefix).dead", topology: topology))
        }

        func publish(_ job: String, properties: AMQPProperties = AMQPProperties(persistent: true)) async throws {
            try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(job.utf8), properties: properties))
        }

        /// The next message on `consumer`, acknowledged.
        static func next(from consumer: AMQPConsumer, within limit: Duration = .seconds(30)) async throws -> AMQPDelivery {
            let delivery = try await consumer.next(within: limit)
            try await delivery.ack()
            return delivery
        }

        /// The next message on `consumer`, acknowledged: a result, or the summary.
        static func reply(from consumer: AMQPConsumer) async throws -> (result: PushResult?, summary: JobSummary?, delivery: AMQPDelivery) {
            let delivery = try await next(from: consumer)
            if delivery.properties.type == "summary" {
                return (nil, try JSONDecoder().decode(JobSummary.self, from: Data(delivery.body)), delivery)
            }
            return (try JSONDecoder().decode(PushResult.self, from: Data(delivery.body)), nil, delivery)
        }

        func stop() async throws {
            #expect(try await worker.stop() == 0, "\(worker.log)")
            await close()
        }

        /// Closes the test's connections and the mock (for a test that stopped the worker itself).
        func close() async {
            await dead.close()
            await results.close()
            await publisher.close()
            try? await mock.shutdown()
        }
    }

    @Test("topic, push type, priority, collapse id and expiration reach APNs as headers; expiration 0 means immediately; a content-available payload with no push_type goes as background at 5")
    func headersReachAPNs() async throws {
        let running = try await Running.start()
        try await running.publish(#"""
            {"id": "all-options", "audience": {"tokens": ["\#(Self.token(1))"]}, "payload": {"aps": {"alert": "call"}},
             "topic": "com.example.app.voip", "push_type": "voip", "priority": 5, "collapse_id": "grp-1",
             "expiration": "2030-01-01T00:00:00.5Z"}
            """#)
        try await running.publish(#"{"id": "now", "audience": {"tokens": ["\#(Self.token(2))"]}, "payload": {"aps": {}}, "expiration": 0}"#)
        try await running.publish(#"{"id": "silent", "audience": {"tokens": ["\#(Self.token(3))"]}, "payload": {"aps": {"content-available": 1}, "sync": "inbox"}}"#)
        var outcomes: [String: Outcome] = [:]
        var summaries = 0
        while summaries < 3 {
            let reply = try await Running.reply(from: running.results)
            if let result = reply.result { outcomes[result.jobID] = result.outcome } else { summaries += 1 }
        }
        #expect(outcomes == ["all-options": .delivered, "now": .delivered, "silent": .delivered])
        let recorded = Dictionary(running.mock.recorded.map { ($0.token, $0) }, uniquingKeysWith: { first, _ in first })
        let full = try #require(recorded[Self.token(1)])
        #expect(full.topic == "com.example.app.voip")
        #expect(full.pushType == "voip")
        #expect(full.priority == "5")
        #expect(full.collapseID == "grp-1")
        #expect(full.expiration == "1893456000")
        let now = try #require(recorded[Self.token(2)])
        #expect(now.expiration == "0")
        #expect(now.topic == "com.example.app" && now.pushType == "alert" && now.priority == "10" && now.collapseID == nil)
        let silent = try #require(recorded[Self.token(3)])
        #expect(silent.pushType == "background" && silent.priority == "5")
        try await running.stop()
    }

    @Test("an app's default_expiration reaches APNs for jobs that name no expiration, fixed at the job's publication in its chunks too")
    func defaultExpiration() async throws {
        let running = try await Running.start(extra: "chunk_size: 2", appExtra: ["default_expiration: 3600"])
        let published = UInt64(Date().timeIntervalSince1970)
        let tokens = (10..<15).map { "\"\(Self.token($0))\"" }.joined(separator: ", ")
        try await running.publish(#"{"id": "later", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {"alert": "hi"}}}"#,
                                  properties: AMQPProperties(persistent: true, timestamp: published))
        try await running.publish(#"{"id": "own", "audience": {"tokens": ["\#(Self.token(20))"]}, "payload": {"aps": {"alert": "hi"}}, "expiration": 0}"#)
        var delivered = 0
        while delivered < 6 {
            if let result = try await Running.reply(from: running.results).result {
                #expect(result.outcome == .delivered, "\(result)")
                delivered += 1
            }
        }
        let expected = Int(published) + 3600
        for record in running.mock.recorded where record.token != Self.token(20) {
            #expect(Int(record.expiration ?? "") == expected, "\(record.token): \(record.expiration ?? "none")")
        }
        #expect(running.mock.recorded.first { $0.token == Self.token(20) }?.expiration == "0")
        #expect(running.mock.recorded.count == 6)
        try await running.stop()
    }

    @Test("a voip job with no topic, for an app whose topic lacks .voip, is dead-lettered naming push_type; nothing is sent")
    func voipWithoutTopic() async throws {
        let running = try await Running.start()
        try await running.publish(
            #"{"id": "voip", "audience": {"tokens": ["\#(Self.token(1))", "\#(Self.token(2))"]}, "payload": {"aps": {}}, "push_type": "voip"}"#,
            properties: AMQPProperties(persistent: true, replyTo: "\(running.prefix).results", messageID: "voip"))
        let letter = try await Running.next(from: running.dead)
        #expect(letter.properties.headers?[WireHeader.error] == "invalid_field")
        #expect(letter.properties.headers?[WireHeader.errorField] == "push_type")
        #expect(letter.properties.headers?[WireHeader.errorMessage]?.stringValue?.contains(".voip") == true)
        #expect(try await Running.reply(from: running.results).summary?.error?.field == "push_type")
        #expect(running.mock.requestCount == 0)
        try await running.stop()
    }

    @Test("a job whose reply queue does not exist is dead-lettered before anything is sent, and not requeued")
    func missingReplyQueue() async throws {
        let running = try await Running.start()
        let missing = "\(running.prefix).nobody-declared-this"
        try await running.publish(
            #"{"id": "nowhere", "audience": {"tokens": ["\#(Self.token(1))", "\#(Self.token(2))"]}, "payload": {"aps": {}}, "reply_to": "\#(missing)"}"#,
            properties: AMQPProperties(persistent: true, replyTo: "\(running.prefix).results", messageID: "nowhere"))
        let letter = try await Running.next(from: running.dead)
        #expect(letter.properties.messageID == "nowhere")
        #expect(letter.properties.headers?[WireHeader.error] == "invalid_field")
        #expect(letter.properties.headers?[WireHeader.errorField] == "reply_to")
        #expect(letter.properties.headers?[WireHeader.errorMessage]?.stringValue?.contains(missing) == true)
        // The error summary goes to the AMQP reply_to, the one queue of the two that exists.
        #expect(try await Running.reply(from: running.results).summary?.error?.code == .invalidField)

        // The worker goes on; the refused job was sent to nobody and is not back.
        try await running.publish(#"{"id": "after", "audience": {"tokens": ["\#(Self.token(3))"]}, "payload": {"aps": {}}, "results": "none"}"#)
        let after = try await Running.next(from: running.results)
        #expect(after.properties.correlationID == "after")
        #expect(running.mock.recorded.map(\.token) == [Self.token(3)])
        await #expect(throws: TestFailure.self) { _ = try await running.dead.next(within: .seconds(2)) }
        try await running.stop()
    }

    @Test("a reply queue deleted mid-job: the job completes and is acknowledged, no device is sent twice")
    func replyQueueVanishes() async throws {
        // 5 devices at a time, each answered after 500 ms: the 100-device job lasts about 10 s,
        // time enough to delete its reply queue while most of it is still to be sent.
        let running = try await Running.start(faults: [MockAPNsFault(.latency(.milliseconds(500)))], appExtra: ["max_in_flight: 5"])
        let replies = "\(running.prefix).replies"
        let listener = try await TestBroker.consumer(queue: replies, topology: AMQPTopology(queues: [.durable(replies)]))
        await listener.close()
        let tokens = (0..<100).map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        try await running.publish(#"{"id": "vanishing", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}, "reply_to": "\#(replies)"}"#)
        try await waitUntil("the first devices are sent") { running.mock.requestCount >= 1 }
        try await TestBroker.rabbitmqctl("delete_queue", replies)

        try await running.worker.waitForLog("job done", within: .seconds(60))
        #expect(running.worker.log.contains("the reply queue vanished during the job"), "\(running.worker.log)")
        // Acknowledged, not requeued: nothing more reaches APNs, and the jobs queue is empty.
        try await Task.sleep(for: .seconds(2))
        let counts = running.mock.deliveryCounts
        #expect(counts.count == 100 && counts.values.allSatisfy { $0 == 1 }, "\(counts.values.filter { $0 > 1 }.count) devices sent twice")
        let jobs = try await TestBroker.consumer(queue: "\(running.prefix).jobs")
        await #expect(throws: TestFailure.self) { _ = try await jobs.next(within: .seconds(1)) }
        await jobs.close()
        try await running.stop()
    }

    @Test("an error summary goes to the reply_to the job's body names, when the body can be read")
    func errorSummaryToBodyReplyTo() async throws {
        let running = try await Running.start()
        let mine = "\(running.prefix).mine"
        let topology = AMQPTopology(queues: [.durable(mine)])
        let replies = try await TestBroker.consumer(queue: mine, topology: topology)
        // No AMQP reply_to property: the body is the only place the producer said where to answer.
        try await running.publish(
            #"{"id": "bad-body", "audience": {"tokens": []}, "payload": {}, "priority": 7, "reply_to": "\#(mine)"}"#,
            properties: AMQPProperties(persistent: true, messageID: "bad-body"))
        let reply = try await Running.reply(from: replies)
        #expect(reply.delivery.properties.correlationID == "bad-body")
        let error = try #require(reply.summary?.error)
        #expect(error.code == .invalidField && error.field == "priority")
        _ = try await Running.next(from: running.dead)
        await replies.close()
        try await running.stop()
    }

    @Test("users and groups the worker cannot resolve are named in the summary's error and the log; the tokens are still sent")
    func unresolvedAudience() async throws {
        let running = try await Running.start()
        try await running.publish(
            #"{"id": "mixed", "audience": {"tokens": ["\#(Self.token(1))"], "users": ["u-1", "u-2"], "groups": ["staff"]}, "payload": {"aps": {}}}"#)
        var summary: JobSummary?
        var delivered = 0
        while summary == nil {
            let reply = try await Running.reply(from: running.results)
            summary = reply.summary
            if reply.result?.outcome == .delivered { delivered += 1 }
        }
        #expect(delivered == 1)
        #expect(summary?.devices == 1)
        let error = try #require(summary?.error)
        #expect(error.code == .unresolvedAudience)
        #expect(error.field == "audience.users")
        #expect(error.message.contains("user u-1") && error.message.contains("group staff"))

        // Only users: no device at all, and the producer is told why.
        try await running.publish(#"{"id": "users-only", "audience": {"users": ["u-3"]}, "payload": {"aps": {}}}"#)
        let only = try #require(try await Running.reply(from: running.results).summary)
        #expect(only.devices == 0)
        #expect(only.error?.code == .unresolvedAudience)
        #expect(running.worker.log.contains("cannot resolve"))
        try await running.stop()
    }
}
