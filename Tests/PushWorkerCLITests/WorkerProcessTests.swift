import AMQP
import APNs
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

@Suite("pushworker run, end to end", .usesBroker)
struct WorkerProcessTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xB000) }

    /// A mock APNs and a configuration file whose queues no other test uses.
    struct Setup {
        let mock: MockAPNsServer
        let config: URL
        let prefix: String
    }

    static func setUp(
        faults: [MockAPNsFault], unregistered: [String: Date] = [:], maxAttempts: Int = 3, extra: String = "", appExtra: [String] = [],
        amqp: String? = nil, prefix: String? = nil, quorumQueues: Bool = false, fcm: ((inout MockAPNsConfiguration) -> Void)? = nil
    ) async throws -> Setup {
        let fixture = try await MockAPNsFixture.start {
            $0.faults = faults
            $0.unregisteredTokens = unregistered
            if let fcm {
                $0.fcmAccounts = [MockAPNsFixture.fcmAccount]
                fcm(&$0)
            }
        }
        let appExtra = appExtra + (fcm == nil ? [] : try fixture.fcmYAML())
        let prefix = prefix ?? TestBroker.uniqueName("e2e")
        let config = try MockAPNsFixture.writeConfiguration("""
            \(amqp ?? "amqp:\n  url: \(TestBroker.url)\n  prefetch: 4")
            queues:
              exchange: \(prefix).push
              jobs: \(prefix).jobs
              dead_letter_exchange: \(prefix).dlx
              dead_letters: \(prefix).dead
              results: \(prefix).results
              registry: \(prefix).registry
            retry_initial_delay_ms: 10
            retry_max_attempts: \(maxAttempts)
            \(extra)
            apps:
            \(fixture.appYAML(extra: appExtra))
            """, quorumQueues: quorumQueues)
        return Setup(mock: fixture.server, config: config, prefix: prefix)
    }

    @Test("valid jobs get one result per device and a summary; invalid ones are dead-lettered with the reason; SIGTERM exits 0")
    func endToEnd() async throws {
        let setup = try await Self.setUp(faults: [
            MockAPNsFault(.reject(.badDeviceToken), tokens: [Self.token(2)]),
            MockAPNsFault(.reject(.unregistered), tokens: [Self.token(5)]),
            MockAPNsFault(.reject(.tooManyRequests), tokens: [Self.token(6)], times: 1),
            MockAPNsFault(.reject(.serviceUnavailable), tokens: [Self.token(7)]),
        ])
        let (mock, config, prefix) = (setup.mock, setup.config, setup.prefix)
        defer { Task { try? await mock.shutdown() } }

        let worker = try RunningProgram.worker(config: config)
        try await worker.waitForLog("worker started")

        let topology = AMQPTopology(queues: [.durable("\(prefix).results"), .durable("\(prefix).dead", quorum: true)])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(prefix).results", topology: topology)
        let dead = try await TestBroker.consumer(queue: "\(prefix).dead", topology: topology)

        // A valid job through the exchange, as producers publish it.
        let tokens = [1, 2, 3, 5, 6, 7].map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        let job = #"{"id": "job-1", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {"alert": "hi"}}}"#
        try await publisher.publish(AMQPMessage(
            exchange: "\(prefix).push", routingKey: "jobs", body: Array(job.utf8),
            properties: AMQPProperties(contentType: "application/json", persistent: true, messageID: "job-1"), mandatory: true))
        var outcomes: [String: Outcome] = [:]
        var summary: JobSummary?
        while summary == nil {
            let delivery = try await results.next(within: .seconds(20))
            try await delivery.ack()
            #expect(delivery.properties.correlationID == "job-1")
            let reply = try Reply(delivery)
            summary = reply.summary
            if let result = reply.result { outcomes[result.token] = result.outcome }
        }
        #expect(outcomes == [
            Self.token(1): .delivered, Self.token(2): .rejected, Self.token(3): .delivered,
            Self.token(5): .rejected, Self.token(6): .delivered, Self.token(7): .failed,
        ])
        #expect(summary?.devices == 6)

        // A job whose expiration has passed: its device is reported expired and never sent.
        let requestsBefore = mock.requestCount
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(#"{"id": "late", "audience": {"tokens": ["\#(Self.token(8))"]}, "payload": {"aps": {}}, "expiration": 1000000000}"#.utf8)))
        let late = try await results.next(within: .seconds(20))
        try await late.ack()
        #expect(try Reply(late).result?.outcome == .expired)
        let lateSummary = try await results.next(within: .seconds(20))
        try await lateSummary.ack()
        #expect(lateSummary.properties.type == "summary")
        #expect(mock.requestCount == requestsBefore)

        // An invalid job: dead-lettered with the reason, an error summary to its reply queue.
        try await publisher.publish(.toQueue(
            "\(prefix).jobs", body: Array(#"{"audience": {"tokens": []}, "payload": {}, "priority": 7}"#.utf8),
            properties: AMQPProperties(headers: ["producer": "test"], persistent: true, replyTo: "\(prefix).results", messageID: "bad-1")))
        let deadLetter = try await dead.next(within: .seconds(20))
        try await deadLetter.ack()
        #expect(deadLetter.properties.messageID == "bad-1")
        #expect(deadLetter.properties.headers?[WireHeader.error] == "invalid_field")
        #expect(deadLetter.properties.headers?[WireHeader.errorMessage]?.stringValue?.contains("priority") == true)
        #expect(deadLetter.properties.headers?["producer"] == "test")
        let errorSummary = try await results.next(within: .seconds(20))
        try await errorSummary.ack()
        let refused = try #require(try Reply(errorSummary).summary)
        #expect(refused.error?.code == .invalidField)
        #expect(refused.jobID == "bad-1")

        // The worker kept running: another job goes through.
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(#"{"id": "job-2", "audience": {"tokens": ["\#(Self.token(4))"]}, "payload": {"aps": {}}, "results": "none"}"#.utf8)))
        let noneSummary = try await results.next(within: .seconds(20))
        try await noneSummary.ack()
        #expect(noneSummary.properties.type == "summary" && noneSummary.properties.correlationID == "job-2")

        #expect(try await worker.stop() == 0, "\(worker.log)")
        #expect(worker.log.contains("job done"))
        await dead.close()
        await results.close()
        await publisher.close()
    }

    @Test("APNs dropping connections with answers unread: every device gets one result, none is lost; each device sent twice shows it in attempts, and the re-sends are counted on /metrics")
    func abruptConnectionLoss() async throws {
        let setup = try await Self.setUp(
            faults: [MockAPNsFault(.goAwayAbrupt(afterRequests: 40), times: 3)], extra: "metrics_address: 127.0.0.1:0")
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let metricsPort = try await worker.metricsPort()
        let prefix = setup.prefix
        let topology = AMQPTopology(queues: [.durable("\(prefix).results")])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(prefix).results", prefetch: 500, topology: topology)

        let count = 300
        let tokens = (0..<count).map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(#"{"id": "cut", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}}"#.utf8)))
        var byToken: [String: PushResult] = [:]
        var summary: JobSummary?
        while summary == nil {
            let delivery = try await results.next(within: .seconds(30))
            try await delivery.ack()
            switch try Reply(delivery) {
            case .summary(let finished): summary = finished
            case .result(let result):
                #expect(byToken[result.token] == nil, "two results for \(result.token)")
                byToken[result.token] = result
            }
        }
        #expect(byToken.count == count && byToken.values.allSatisfy { $0.outcome == .delivered })
        #expect(summary?.outcomes == [.delivered: count])
        let deliveries = setup.mock.deliveryCounts
        #expect(deliveries.count == count, "lost: \(count - deliveries.count)")
        // Each firing delivers one notification whose answer never leaves the server.
        let twice = deliveries.filter { $0.value > 1 }.keys
        #expect(twice.count >= 3)
        #expect(twice.allSatisfy { (byToken[$0]?.attempts ?? 0) >= 2 }, "\(twice.map { byToken[$0]?.attempts ?? 0 })")
        let page = try #require(await HTTPProbe.get(port: metricsPort, "/metrics"))
        let resends = HTTPProbe.samples(page.body).sum("pushworker_apns_resends_total", ["app": "demo", "cause": "connection"])
        #expect(resends >= Double(twice.count), "\(resends) re-sends counted for \(twice.count) devices delivered twice")
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await results.close()
        await publisher.close()
    }

    @Test("SIGTERM during a job: the job is finished, every device has its result, the job is acked, exit 0")
    func gracefulShutdown() async throws {
        // The grace is long: on a machine busy with the whole suite starting at once, a debug
        // build's job of 200 devices once took past the default 30 s to drain (the worker, signalled
        // 3 s after its start, logged nothing more until its grace ran out). Exit 0 still comes only
        // from a job drained.
        let setup = try await Self.setUp(faults: [MockAPNsFault(.latency(.seconds(2)))], extra: "shutdown_grace_seconds: 150")
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config, arguments: ["--log-format", "json"])
        try await worker.waitForLog("worker started")
        let prefix = setup.prefix
        let topology = AMQPTopology(queues: [.durable("\(prefix).results")])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(prefix).results", prefetch: 500, topology: topology)

        let tokens = (0..<200).map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(#"{"id": "slow", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}}"#.utf8)))
        let deadline = ContinuousClock.now + .seconds(20)
        while setup.mock.requestCount == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(setup.mock.requestCount > 0)

        #expect(try await worker.stop(signal: SIGTERM, within: .seconds(180)) == 0, "\(worker.log)")
        var devices = Set<String>()
        var summaries = 0
        while summaries == 0 {
            let delivery = try await results.next(within: .seconds(20))
            try await delivery.ack()
            switch try Reply(delivery) {
            case .summary: summaries += 1
            case .result(let result): devices.insert(result.token)
            }
        }
        #expect(devices.count == 200)
        // --log-format json: every line an object; the job line carries its fields.
        let lines = worker.log.split(separator: "\n")
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == lines.count, "\(worker.log)")
        let jobLine = objects.first { $0["message"] as? String == "job done" }
        #expect(jobLine?["job"] as? String == "slow" && jobLine?["devices"] as? String == "200" && jobLine?["level"] as? String == "info")
        // Acknowledged: nothing is left for the next worker.
        let jobs = try await TestBroker.consumer(queue: "\(prefix).jobs", topology: AMQPTopology())
        await #expect(throws: TestFailure.self) { _ = try await jobs.next(within: .seconds(1)) }
        await jobs.close()
        await results.close()
        await publisher.close()
    }

    /// A worker whose one job is held by the mock's answer `latency` late, signalled once with
    /// SIGTERM after its request reached the mock: the start of every shutdown-escalation test.
    private static func signalledWithJobInHand(
        _ id: String, latency: Duration, extra: String = "", appExtra: [String] = []
    ) async throws -> (Setup, RunningProgram) {
        let setup = try await Self.setUp(faults: [MockAPNsFault(.latency(latency))], extra: extra, appExtra: appExtra)
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let publisher = try await TestBroker.publisher()
        try await publisher.publish(.toQueue(
            "\(setup.prefix).jobs", body: Array(#"{"id": "\#(id)", "audience": {"tokens": ["\#(Self.token(1))"]}, "payload": {"aps": {}}}"#.utf8)))
        await publisher.close()
        // The job must be in hand before the signal: a worker signalled before it took the job
        // exits 0 with nothing to redeliver. A lack of progress: no request at the mock in 60 s.
        try await waitUntil("the worker's request reaches the mock") { setup.mock.requestCount > 0 }
        worker.process.signal(SIGTERM)
        try await worker.waitForLog("signal received")
        return (setup, worker)
    }

    /// The job the worker held is back in its queue, redelivered: nothing was lost by the exit.
    private static func expectRedelivered(_ id: String, prefix: String) async throws {
        let jobs = try await TestBroker.consumer(queue: "\(prefix).jobs")
        let again = try await jobs.next(within: .seconds(10))
        #expect(again.redelivered)
        #expect(String(decoding: again.body, as: UTF8.self).contains(id))
        try await again.ack()
        await jobs.close()
    }

    @Test("a second signal exits at once, and the unfinished job is redelivered, not lost")
    func secondSignal() async throws {
        // The mock answers a minute late: on a loaded machine, 10 s could pass between the request
        // and the second signal, and a worker that finished its job then exited 0 with nothing to
        // redeliver.
        let (setup, worker) = try await Self.signalledWithJobInHand("stuck", latency: .seconds(60))
        defer { Task { try? await setup.mock.shutdown() } }
        // 130 comes only from the second-signal path: a worker that drained instead would wait out
        // the mock's latency, past `stop`'s 30 s. The deadline only catches a worker that never exits.
        let status = try await worker.stop(signal: SIGTERM)
        #expect(status == 130, "exit status \(status); the worker's log:\n\(worker.log)")
        try await Self.expectRedelivered("stuck", prefix: setup.prefix)
    }

    @Test("past shutdown_grace_seconds the worker exits 1 and the unfinished job is redelivered; /metrics and /healthz answer while it drains")
    func graceExceeded() async throws {
        // A grace of 30 s, so the probes below still find the endpoint on a busy machine. The
        // mock answers 5 minutes late and the request waits 10 (past the default 15 s, it would
        // time out within the grace, and the job drain).
        let (setup, worker) = try await Self.signalledWithJobInHand(
            "overdue", latency: .seconds(300), extra: "shutdown_grace_seconds: 30\nmetrics_address: 127.0.0.1:0",
            appExtra: ["request_timeout_ms: 600000"])
        defer { Task { try? await setup.mock.shutdown() } }
        let metricsPort = try await worker.metricsPort()
        // The endpoint stops after the drain, not with the signal.
        #expect(await HTTPProbe.get(port: metricsPort, "/healthz")?.status == 200)
        #expect(await HTTPProbe.get(port: metricsPort, "/metrics")?.status == 200)
        // 1 comes only from the grace period: a worker that drained would wait out the mock's
        // latency and exit 0. The deadline only catches a worker that never exits.
        let deadline = ContinuousClock.now + .seconds(120)
        while worker.process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!worker.process.isRunning, "\(worker.log)")
        #expect(worker.process.terminationStatus == 1, "\(worker.log)")
        #expect(worker.log.contains("shutdown grace period of 30 s exceeded; exiting"), "\(worker.log)")
        try await Self.expectRedelivered("overdue", prefix: setup.prefix)
    }

    @Test("jobs waiting for room among large bodies when the worker stops go back to the queue unsent; the job in work finishes")
    func waitingLargeJobsReturnOnStop() async throws {
        // A budget of 64 KiB, which each job of 1,000 tokens (about 68 KB; sent in the now lane,
        // not split) fills alone: while one is in work, its requests answered 2 s late, 256 in
        // flight at a time (about 8 s on a quiet machine: time enough to signal the worker), the
        // other two wait in hand. The grace is long, so that a machine busy enough to stretch
        // those 8 s past the default 30 s still lets the job finish. Which one goes first is the
        // tasks' order, not the queue's.
        let jobs = ["first", "second", "third"].enumerated().map { index, id in
            (id: id, tokens: (0..<1000).map { TestDeviceTokens.hex($0, series: 0xB0_0000 * (index + 1)) })
        }
        let setup = try await Self.setUp(faults: [MockAPNsFault(.latency(.seconds(2)))], extra: "lanes: {now_large_job_bytes: 65536}\nshutdown_grace_seconds: 150")
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let publisher = try await TestBroker.publisher()
        let bodies = jobs.map { job in
            Array(#"{"id": "\#(job.id)", "audience": {"tokens": ["\#(job.tokens.joined(separator: "\", \""))"]}, "payload": {"aps": {}}}"#.utf8)
        }
        #expect(bodies.allSatisfy { $0.count > JobBodyBudget.largeBodyBytes }, "each body must count against the budget")
        for body in bodies { try await publisher.publish(.toQueue("\(setup.prefix).jobs", body: body)) }
        // All three in hand (none left ready in the queue) and one's requests at the mock.
        let queue = "\(setup.prefix).jobs"
        let ready: @Sendable () async throws -> Int = { try await publisher.perform(.inspect(queue))?.messages ?? -1 }
        try await withTimeout(.seconds(60), "the three jobs delivered to the worker") {
            while try await ready() != 0 { try await Task.sleep(for: .milliseconds(50)) }
        }
        try await waitUntil("a job's requests reach the mock") { setup.mock.requestCount > 0 }
        let status: Int32 = try await worker.stop(signal: SIGTERM, within: .seconds(180))
        #expect(status == 0, "\(worker.log)")
        // One job sent whole during the drain; the other two not at all, and back in the queue.
        let sent = Set(setup.mock.recorded.map(\.token))
        let reached = jobs.filter { job in job.tokens.contains { sent.contains($0) } }
        #expect(reached.count == 1 && reached.allSatisfy { $0.tokens.allSatisfy(sent.contains) }, "sent: \(reached.map(\.id)); the worker's log:\n\(worker.log)")
        let consumer = try await TestBroker.consumer(queue: queue)
        var back: [String] = []
        for _ in 0..<2 {
            let again = try await consumer.next(within: .seconds(30))
            back.append(JobDecoder.names(in: again.body).id ?? "?")
            try await again.ack()
        }
        await consumer.close()
        #expect(Set(back) == Set(jobs.map(\.id)).subtracting(reached.map(\.id)))
        #expect(try await ready() == 0)
        await publisher.close()
    }

    @Test("devices still failing after a worker's share of attempts come back through the delayed retry queue")
    func delayedRetry() async throws {
        let setup = try await Self.setUp(
            faults: [
                MockAPNsFault(.reject(.serviceUnavailable), tokens: [Self.token(1)], times: 4),
                MockAPNsFault(.reject(.serviceUnavailable), tokens: [Self.token(2)]),
            ],
            maxAttempts: 6, extra: "retry_in_process_attempts: 2\nretry_delays_ms: [300, 600]")
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config)
        try await worker.waitForLog("worker started")
        let prefix = setup.prefix
        let topology = AMQPTopology(queues: [.durable("\(prefix).results")])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(prefix).results", topology: topology)
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(#"{"id": "flaky", "audience": {"tokens": ["\#(Self.token(1))", "\#(Self.token(2))"]}, "payload": {"aps": {}}}"#.utf8)))

        var finals: [String: PushResult] = [:]
        var retrying: [Int] = []
        while finals.count < 2 || retrying.last != 0 {
            let delivery = try await results.next(within: .seconds(20))
            try await delivery.ack()
            switch try Reply(delivery) {
            case .summary(let summary):
                retrying.append(summary.retrying)
            case .result(let result):
                #expect(finals[result.token] == nil, "two results for \(result.token)")
                finals[result.token] = result
            }
        }
        #expect(retrying == [2, 2, 0], "\(retrying)")
        #expect(finals[Self.token(1)]?.outcome == .delivered)
        #expect(finals[Self.token(1)]?.attempts == 5)
        #expect(finals[Self.token(2)]?.outcome == .failed)
        #expect(finals[Self.token(2)]?.attempts == 6)
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await results.close()
        await publisher.close()
    }
}
