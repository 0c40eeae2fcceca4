import AMQP
import APNs
import APNsHTTP2
import Foundation
import MockAPNs
import Logging
import PushWorker
import SQLiteStores
import Stores
import ServiceLifecycle
import TestSupport
import Testing

@Suite("Job processing against the mock APNs and a real broker", .usesBroker)
struct JobProcessorTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xA000) }

    struct Harness {
        let server: MockAPNsServer
        let client: APNsClient
        let publisher: AMQPPublisher
        let consumer: AMQPConsumer
        let queue: String
        let processor: JobProcessor

        static func start(
            maxInFlight: Int? = nil, _ change: (inout MockAPNsConfiguration) -> Void = { _ in }
        ) async throws -> Harness {
            let server = try await MockAPNsFixture.start(change).server
            let source = ProviderTokenSource(keyID: MockAPNsFixture.keyID, teamID: MockAPNsFixture.teamID, key: try MockAPNsFixture.signingKey())
            var clientConfiguration = APNsClientConfiguration(baseURL: server.url, authentication: .token(source))
            clientConfiguration.caFile = MockAPNsFixture.path("ca.pem")
            if let transport = MockAPNsFixture.transport {
                clientConfiguration.transport = try #require(APNsTransport(rawValue: transport), "PUSHWORKER_TEST_TRANSPORT=\(transport)")
            }
            let client = APNsClient(configuration: clientConfiguration)
            let queue = TestBroker.uniqueName("results")
            let topology = AMQPTopology(queues: [.init(queue, arguments: TestBroker.expiry)])
            let publisher = try await TestBroker.publisher(topology: topology)
            let consumer = try await TestBroker.consumer(queue: queue, topology: topology)
            let processor = JobProcessor(
                client: client, admission: DeviceAdmission(maxInFlight: maxInFlight ?? AppConfiguration.defaultMaxInFlight), topic: "com.example.app", appName: "demo", results: ResultPublisher(publisher: publisher),
                retry: RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50)))
            return Harness(server: server, client: client, publisher: publisher, consumer: consumer, queue: queue, processor: processor)
        }

        /// Reads messages until the summary; returns results by token, and the summary.
        func collect() async throws -> (results: [String: [String: Any]], summary: [String: Any]) {
            var results: [String: [String: Any]] = [:]
            while true {
                let delivery = try await consumer.next()
                try await delivery.ack()
                let object = try #require(try JSONSerialization.jsonObject(with: Data(delivery.body)) as? [String: Any])
                #expect(delivery.properties.persistent == true)
                #expect(delivery.properties.contentType == "application/json")
                if delivery.properties.type == "summary" { return (results, object) }
                #expect(delivery.properties.type == "result")
                let token = try #require(object["token"] as? String)
                #expect(results[token] == nil, "two results for \(token)")
                results[token] = object
            }
        }

        func stop() async {
            await consumer.close()
            await publisher.close()
            client.shutdown()
            try? await server.shutdown()
        }
    }

    @Test("one result per device with the right outcome: 200, 400, 410, 429 then 200, 503 until attempts run out")
    func outcomes() async throws {
        let gone = Date(timeIntervalSince1970: 1_700_000_000.5)
        let harness = try await Harness.start {
            $0.unregisteredTokens = [Self.token(2): gone]
            $0.faults = [
                MockAPNsFault(.reject(.badDeviceToken), tokens: [Self.token(1)]),
                MockAPNsFault(.reject(.tooManyRequests), tokens: [Self.token(3)], times: 1),
                MockAPNsFault(.reject(.serviceUnavailable), tokens: [Self.token(4)]),
            ]
        }
        // Recipients come deduplicated from the pipeline's resolution (JobPipelineTests.duplicates).
        let tokens = (0..<5).map(Self.token)
        let job = PushJob(id: "job-outcomes", app: "demo", audience: .init(tokens: tokens), payload: Array(#"{"aps":{"alert":"x"}}"#.utf8))
        let summary = try await harness.processor.process(job, devices: JobDevices(send: tokens.map { Recipient(token: $0) }), replyTo: harness.queue).summary
        #expect(summary.devices == 5)
        #expect(summary.outcomes == [.delivered: 2, .rejected: 2, .failed: 1])

        let (results, published) = try await harness.collect()
        #expect(results.count == 5)
        func result(_ index: Int) -> [String: Any] { results[Self.token(index)] ?? [:] }
        #expect(result(0)["outcome"] as? String == "delivered" && result(0)["attempts"] as? Int == 1 && result(0)["status"] as? Int == 200)
        #expect(result(0)["apns_id"] is String && result(0)["job_id"] as? String == "job-outcomes" && result(0)["app"] as? String == "demo")
        #expect(result(1)["outcome"] as? String == "rejected" && result(1)["reason"] as? String == "BadDeviceToken" && result(1)["status"] as? Int == 400)
        #expect(result(2)["outcome"] as? String == "rejected" && result(2)["status"] as? Int == 410 && result(2)["reason"] as? String == "Unregistered")
        #expect((result(2)["timestamp"] as? NSNumber)?.int64Value == 1_700_000_000_500)
        #expect(result(3)["outcome"] as? String == "delivered" && result(3)["attempts"] as? Int == 2)
        #expect(result(4)["outcome"] as? String == "failed" && result(4)["attempts"] as? Int == 3 && result(4)["status"] as? Int == 503)
        #expect(result(0).keys.sorted() == ["apns_id", "apns_unique_id", "app", "attempts", "job_id", "outcome", "reason", "status", "timestamp", "token", "user"])
        #expect(published["job_id"] as? String == "job-outcomes")
        #expect(published["outcomes"] as? [String: Int] == ["delivered": 2, "rejected": 2, "failed": 1, "filtered": 0, "expired": 0, "cancelled": 0])
        #expect(harness.server.deliveryCounts[Self.token(0)] == 1)
        await harness.stop()
    }

    @Test("a job of more devices than slots goes out in batches: each device sent once with one result, never more in flight than the slots")
    func batches() async throws {
        // Answers that take a while, so that the slots are all taken and batches form from what frees up.
        let harness = try await Harness.start(maxInFlight: 24) { $0.faults = [MockAPNsFault(.latency(.milliseconds(5)))] }
        let tokens = (0..<300).map(Self.token)
        let job = PushJob(id: "job-batches", app: "demo", audience: .init(tokens: tokens), payload: Array(#"{"aps":{"alert":"x"}}"#.utf8))
        let summary = try await harness.processor.process(job, devices: JobDevices(send: tokens.map { Recipient(token: $0) }), replyTo: harness.queue).summary
        #expect(summary.outcomes == [.delivered: 300])
        let (results, _) = try await harness.collect()
        #expect(Set(results.keys) == Set(tokens))
        #expect(results.values.allSatisfy { $0["outcome"] as? String == "delivered" && $0["attempts"] as? Int == 1 })
        let counts = harness.server.deliveryCounts
        #expect(counts.count == 300 && counts.values.allSatisfy { $0 == 1 })
        #expect(harness.server.peakConcurrentRequests <= 24)
        #expect(harness.server.peakConcurrentRequests > 1)
        await harness.stop()
    }

    @Test("devices reached after the expiration are 'expired' and not sent; results: failures reports only failures")
    func expiredAndFailuresOnly() async throws {
        let harness = try await Harness.start { $0.faults = [MockAPNsFault(.reject(.badDeviceToken), tokens: [Self.token(1)])] }
        let past = PushJob(
            id: "job-expired", app: "demo", audience: .init(tokens: [Self.token(0)]), payload: Array("{}".utf8),
            expiration: .at(Date(timeIntervalSinceNow: -5)))
        _ = try await harness.processor.process(past, devices: JobDevices(send: [Recipient(token: Self.token(0), user: "u-1")]), replyTo: harness.queue)
        let (expired, _) = try await harness.collect()
        #expect(expired[Self.token(0)]?["outcome"] as? String == "expired")
        #expect(expired[Self.token(0)]?["user"] as? String == "u-1")
        #expect(expired[Self.token(0)]?["attempts"] as? Int == 0)
        #expect(harness.server.requestCount == 0)

        let failuresOnly = PushJob(
            id: "job-failures", app: "demo", audience: .init(tokens: [Self.token(0), Self.token(1)]), payload: Array("{}".utf8),
            results: .failures)
        _ = try await harness.processor.process(failuresOnly, devices: JobDevices(send: [Recipient(token: Self.token(0)), Recipient(token: Self.token(1))]), replyTo: harness.queue)
        let (failures, summary) = try await harness.collect()
        #expect(Array(failures.keys) == [Self.token(1)])
        #expect(summary["devices"] as? Int == 2)
        await harness.stop()
    }

    @Test("devices filtered by preferences get outcome 'filtered' and no request, and count in the summary")
    func filtered() async throws {
        let harness = try await Harness.start()
        let job = PushJob(id: "job-filtered", app: "demo", audience: .init(tokens: [Self.token(0)]), payload: Array("{}".utf8))
        let report = try await harness.processor.process(
            job, devices: JobDevices(send: [Recipient(token: Self.token(0))], filtered: [Recipient(token: Self.token(1), user: "u-9")]), replyTo: harness.queue)
        #expect(report.summary.devices == 2 && report.summary.outcomes == [.delivered: 1, .filtered: 1])
        let (results, _) = try await harness.collect()
        #expect(results[Self.token(1)]?["outcome"] as? String == "filtered")
        #expect(results[Self.token(1)]?["user"] as? String == "u-9")
        #expect(harness.server.requestCount == 1)
        await harness.stop()
    }

    @Test("a job that comes back sends and publishes nothing again to the devices the ledger holds: sent, filtered and withheld by quiet hours alike")
    func cameBack() async throws {
        let harness = try await Harness.start()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("came-back-\(UUID().uuidString.prefix(8)).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file + suffix) } }
        let logger = Logger(label: "test.came-back")
        let writer = LedgerWriter(ledger: try SQLiteLedgerStore(path: file), retentionDays: 30, logger: logger)
        let group = ServiceGroup(services: [writer], logger: logger)
        let running = Task { try await group.run() }
        var processor = harness.processor
        processor.ledger = writer
        let job = PushJob(id: "job-back", app: "demo", audience: .init(tokens: [Self.token(0)]), payload: Array("{}".utf8))
        func process() async throws -> JobProcessor.Report {
            try await processor.process(
                job,
                devices: JobDevices(
                    send: [Recipient(token: Self.token(0))], filtered: [Recipient(token: Self.token(1), user: "u-1")],
                    withheld: [(Recipient(token: Self.token(2), user: "u-2"), "quiet_hours")]),
                part: JobPart(mayRepeat: true), replyTo: harness.queue)
        }
        let first = try await process()
        #expect(first.summary.outcomes == [.delivered: 1, .filtered: 2])
        let (results, _) = try await harness.collect()
        #expect(Set(results.keys) == Set([0, 1, 2].map(Self.token)))

        // Redelivered: every device is in the ledger, so nothing is sent or published but the summary.
        let again = try await process()
        #expect(again.summary.outcomes == [.delivered: 1, .filtered: 2], "the held devices count in the summary as before")
        let (repeated, _) = try await harness.collect()
        #expect(repeated.isEmpty, "published again: \(repeated.keys.sorted())")
        #expect(harness.server.requestCount == 1)
        await group.triggerGracefulShutdown()
        try await running.value
        await harness.stop()
    }
}
