import AMQP
import APNs
import Foundation
import MockAPNs
import PushWorker
import TestSupport
import Testing

@Suite("metrics and health endpoints of pushworker run", .usesBroker)
struct OperatorEndpointTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xE000) }

    /// Polls `path` until `accept` takes the answer; a deadline on an endpoint that stops
    /// changing, not on the whole wait.
    static func poll(port: Int, _ path: String, within limit: Duration = .seconds(60), until accept: (HTTPProbe.Answer) -> Bool) async throws -> HTTPProbe.Answer {
        var deadline = ContinuousClock.now + limit
        var last: HTTPProbe.Answer?
        while true {
            if let answer = await HTTPProbe.get(port: port, path) {
                // A changed answer is progress (counters moving, a probe turning): the wait goes on.
                if last.map({ $0.status != answer.status || $0.body != answer.body }) ?? true { deadline = ContinuousClock.now + limit }
                last = answer
                if accept(answer) { return answer }
            }
            guard ContinuousClock.now < deadline else {
                throw TestFailure("\(path) did not change for \(limit) without giving the expected answer; last: \(last.map { "\($0.status) \($0.body)" } ?? "nothing")")
            }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    @Test("counters scraped during and after a job equal the results published, by app, outcome and reason")
    func countersMatchResults() async throws {
        let fixture = try await MockAPNsFixture.start {
            $0.faults = [
                MockAPNsFault(.reject(.badDeviceToken), tokens: [Self.token(2)]),
                MockAPNsFault(.reject(.unregistered), tokens: [Self.token(5)]),
            ]
        }
        let mock = fixture.server
        defer { Task { try? await mock.shutdown() } }
        let prefix = TestBroker.uniqueName("metrics")
        let config = try MockAPNsFixture.writeConfiguration("""
            metrics_address: 127.0.0.1:0
            amqp: {url: "\(TestBroker.url)"}
            queues: {exchange: \(prefix).push, jobs: \(prefix).jobs, dead_letter_exchange: \(prefix).dlx, dead_letters: \(prefix).dead, results: \(prefix).results}
            apps:
            \(fixture.appYAML(extra: ["connections: 2"]))
            """)
        let worker = try RunningProgram.worker(config: config)
        try await worker.waitForLog("worker started")
        let metricsPort = try await worker.metricsPort()
        _ = try await Self.poll(port: metricsPort, "/readyz") { $0.status == 200 }

        let results = try await TestBroker.consumer(queue: "\(prefix).results")
        let publisher = try await TestBroker.publisher()
        let count = 40
        let tokens = (1...count).map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(
            #"{"id": "metrics-1", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {"alert": "hi"}}}"#.utf8)))
        try await publisher.publish(.toQueue("\(prefix).jobs", body: Array("not json".utf8), properties: AMQPProperties(messageID: "broken")))

        var outcomes: [Outcome: Int] = [:]
        var reasons: [String: Int] = [:]
        var summary: JobSummary?
        var scrapedDuring: [HTTPProbe.Sample]?
        while summary == nil {
            let delivery = try await results.next(within: .seconds(20))
            try await delivery.ack()
            let reply = try Reply(delivery)
            summary = reply.summary
            if let result = reply.result {
                outcomes[result.outcome, default: 0] += 1
                if let reason = result.reason { reasons[reason, default: 0] += 1 }
                if scrapedDuring == nil, let page = await HTTPProbe.get(port: metricsPort, "/metrics") {
                    scrapedDuring = HTTPProbe.samples(page.body)
                }
            }
        }
        #expect(summary?.devices == count)
        #expect(outcomes == [.delivered: count - 2, .rejected: 2])
        let during = try #require(scrapedDuring, "no scrape succeeded during the job")
        #expect(during.sum("pushworker_notifications_total") <= Double(count))

        // The job is counted once its summary is out; poll for it, then compare.
        let page = try await Self.poll(port: metricsPort, "/metrics") {
            HTTPProbe.samples($0.body).sum("pushworker_jobs_total", ["outcome": "done"]) == 1
                && HTTPProbe.samples($0.body).sum("pushworker_jobs_total", ["outcome": "refused"]) == 1
        }
        let samples = HTTPProbe.samples(page.body)
        for outcome in Outcome.allCases {
            #expect(samples.sum("pushworker_notifications_total", ["app": "demo", "outcome": outcome.rawValue]) == Double(outcomes[outcome] ?? 0), "\(outcome)")
        }
        #expect(samples.sum("pushworker_notifications_total", ["outcome": "rejected", "reason": "BadDeviceToken"]) == 1)
        #expect(samples.sum("pushworker_notifications_total", ["outcome": "rejected", "reason": "Unregistered"]) == 1)
        #expect(samples.sum("pushworker_notifications_total", ["outcome": "delivered", "reason": ""]) == Double(count - 2))
        #expect(reasons == ["BadDeviceToken": 1, "Unregistered": 1])
        // One HTTP/2 exchange per device: no retries here.
        #expect(samples.sum("pushworker_apns_request_duration_seconds_count", ["app": "demo"]) == Double(count))
        #expect(samples.sum("pushworker_apns_request_duration_seconds_bucket", ["app": "demo", "le": "+Inf"]) == Double(count))
        #expect(samples.sum("pushworker_jobs_total", ["outcome": "refused", "code": "invalid_json"]) == 1)
        // Per lane and app: the job of app demo, and the one refused before its app was read.
        #expect(samples.sum("pushworker_jobs_total", ["lane": "now"]) == 2)
        #expect(samples.sum("pushworker_job_duration_seconds_count", ["lane": "now", "app": "demo"]) == 1)
        #expect(samples.sum("pushworker_job_duration_seconds_count", ["lane": "now", "app": ""]) == 1)
        #expect(samples.sum("pushworker_dead_letters_total", ["queue": "\(prefix).jobs", "code": "invalid_json"]) == 1)
        #expect(samples.sum("pushworker_apns_requests_in_flight", ["app": "demo"]) == 0)
        // A new connection carries one stream until APNs has accepted a request, so 40 devices
        // at once open both.
        #expect(samples.sum("pushworker_apns_connections", ["app": "demo"]) == 2)
        #expect(samples.sum("pushworker_provider_token_refreshes_total", ["key_id": MockAPNsFixture.keyID]) == 1)
        #expect(samples.sum("pushworker_retries_handed_on_total") == 0)
        #expect(samples.sum("pushworker_amqp_reconnects_total") == 0)
        #expect(mock.requestCount == count)

        #expect(await HTTPProbe.get(port: metricsPort, "/healthz")?.status == 200)
        #expect(await HTTPProbe.get(port: metricsPort, "/nothing")?.status == 404)
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await results.close()
        await publisher.close()
    }

    @Test("Android devices on /metrics and /readyz: results by platform, FCM's 429s and gauges; an app whose grant Google refuses turns /readyz to 503 naming its account, and its Android devices wait for later rounds without a send")
    func fcmMetricsAndReadiness() async throws {
        let (good, busy) = (FCMWorkerTests.android("metricsgood"), FCMWorkerTests.android("metricsbusy"))
        let fixture = try await MockAPNsFixture.start {
            $0.fcmAccounts = [MockAPNsFixture.fcmAccount]
            $0.fcmFailures = [busy: MockFCMFailure(status: 429, code: "QUOTA_EXCEEDED", retryAfter: 1, times: 1)]
            $0.faults = [MockAPNsFault(.reject(.serviceUnavailable), tokens: [Self.token(2)])]
        }
        let mock = fixture.server
        defer { Task { try? await mock.shutdown() } }
        // Another key under the same account's name: Google answers "Invalid JWT Signature".
        var fields = TestServiceAccount.fields(tokenURI: "\(mock.url)/token")
        fields["private_key"] = try await TestKeys.newRSAKey()
        fields["client_email"] = "revoked@\(TestServiceAccount.projectID).iam.gserviceaccount.com"
        let revoked = FileManager.default.temporaryDirectory.appendingPathComponent("revoked-\(UUID().uuidString.prefix(8)).json")
        try TestServiceAccount.json(fields).write(to: revoked)
        let prefix = TestBroker.uniqueName("fcmmetrics")
        let config = try MockAPNsFixture.writeConfiguration("""
            metrics_address: 127.0.0.1:0
            amqp: {url: "\(TestBroker.url)"}
            queues: {exchange: \(prefix).push, jobs: \(prefix).jobs, dead_letter_exchange: \(prefix).dlx, dead_letters: \(prefix).dead, results: \(prefix).results}
            retry_delays_ms: [30000, 120000]
            apps:
            \(fixture.appYAML(extra: try fixture.fcmYAML()))
            \(fixture.appYAML(name: "revoked", extra: ["fcm:", "  service_account: \(revoked.path)", "  url: \(mock.url)", "  ca_file: \(MockAPNsFixture.path("ca.pem"))"]))
            """)
        let worker = try RunningProgram.worker(config: config)
        try await worker.waitForLog("worker started")
        let metricsPort = try await worker.metricsPort()
        _ = try await Self.poll(port: metricsPort, "/readyz") { $0.status == 200 }
        let results = try await TestBroker.consumer(queue: "\(prefix).results")
        let publisher = try await TestBroker.publisher()
        func run(_ id: String, _ job: String) async throws -> JobSummary {
            try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(job.utf8)))
            while true {
                let delivery: AMQPDelivery
                do { delivery = try await results.next(within: .seconds(30)) } catch { throw TestFailure("\(error); the worker's log:\n\(worker.log)") }
                try await delivery.ack()
                if let summary = try Reply(delivery).summary, summary.jobID == id, summary.chunk == nil { return summary }
            }
        }
        let iphone = Self.token(1)
        let unwell = Self.token(2)
        let first = try await run("both", #"{"id": "both", "app": "demo", "audience": {"tokens": ["\#(iphone)", "\#(unwell)"], "fcm_tokens": ["\#(good)", "\#(busy)"]}, "notification": {"title": "Hi"}}"#)
        #expect(first.outcomes == [.delivered: 2] && first.retrying == 2, "\(first)")
        // FCM's quota answer asks for a minute at least: that device's retry job goes to the
        // round that pauses that long (120 s); the iPhone APNs kept answering 503 to, to the first
        // (30 s: long enough to be read here before it comes back on a busy machine).
        let firstRound = try await TestBroker.consumer(queue: "\(prefix).jobs.retry.30000ms")
        let soon = String(decoding: try await firstRound.next(within: .seconds(25)).body, as: UTF8.self)
        #expect(soon.contains(unwell) && !soon.contains(busy))
        await firstRound.close()
        let slowRound = try await TestBroker.consumer(queue: "\(prefix).jobs.retry.120000ms")
        let later = String(decoding: try await slowRound.next(within: .seconds(30)).body, as: UTF8.self)
        #expect(later.contains(busy) && !later.contains(unwell))
        await slowRound.close()
        // No access token: the device is tried again in later rounds (a key being rotated comes
        // back), while the grant is not asked again for 30 s.
        let refused = try await run("revoked", #"{"id": "revoked", "app": "revoked", "audience": {"fcm_tokens": ["\#(good)"]}, "notification": {"title": "Hi"}}"#)
        #expect(refused.outcomes == [:] && refused.retrying == 1, "\(refused)")

        let page = try await Self.poll(port: metricsPort, "/metrics") {
            HTTPProbe.samples($0.body).sum("pushworker_retries_handed_on_total", ["app": "revoked"]) == 1
        }
        let samples = HTTPProbe.samples(page.body)
        #expect(samples.sum("pushworker_notifications_total", ["app": "demo", "platform": "apns", "outcome": "delivered"]) == 1)
        #expect(samples.sum("pushworker_notifications_total", ["app": "demo", "platform": "fcm", "outcome": "delivered"]) == 1)
        #expect(samples.sum("pushworker_fcm_quota_exceeded_total", ["app": "demo"]) == 1)
        #expect(samples.sum("pushworker_fcm_grants_total", ["project": TestServiceAccount.projectID, "result": "granted"]) == 1)
        #expect(samples.sum("pushworker_fcm_grants_total", ["result": "refused"]) == 1)
        // Per account: the good one of the same project is not refused.
        #expect(samples.sum("pushworker_fcm_credentials_refused", ["account": "revoked@\(TestServiceAccount.projectID).iam.gserviceaccount.com"]) == 1)
        #expect(samples.sum("pushworker_fcm_credentials_refused", ["account": TestServiceAccount.clientEmail]) == 0)
        #expect(samples.sum("pushworker_fcm_requests_in_flight", ["app": "demo"]) == 0)
        #expect(samples.sum("pushworker_fcm_connections", ["app": "demo"]) >= 1)
        #expect(samples.sum("pushworker_fcm_request_duration_seconds_count", ["app": "demo"]) == 2)
        let ready = try #require(await HTTPProbe.get(port: metricsPort, "/readyz"))
        #expect(ready.status == 503 && ready.body.contains("fcm") && ready.body.contains("revoked@") && ready.body.contains("Invalid JWT Signature"), "\(ready.body)")
        #expect(worker.log.contains("FCM refused the service account's grant"), "\(worker.log)")
        #expect(mock.fcmMessages.count == 1, "the one accepted")
        #expect(try await worker.stop() == 0, "\(worker.log)")
        await results.close()
        await publisher.close()
    }

    @Test("/readyz answers 503 naming the broker while it cannot be reached, and 200 once it can; /healthz answers throughout")
    func readinessFollowsTheBroker() async throws {
        let fixture = try await MockAPNsFixture.start()
        let mock = fixture.server
        defer { Task { try? await mock.shutdown() } }
        let broker = try AMQPConfiguration(url: TestBroker.url)
        // The worker is pointed at a port where nothing listens yet; a relay to the real broker
        // opens there later, as a broker starting after its workers would.
        let closedBroker = try ClosedPort()
        let brokerPort = closedBroker.port
        let prefix = TestBroker.uniqueName("ready")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(prefix)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // `pushworker health --config` below reads the port from the file.
        let (worker, metricsPort, config) = try await RunningProgram.worker(onFreePort: { metricsPort in
            try MockAPNsFixture.writeConfiguration("""
                metrics_address: 127.0.0.1:\(metricsPort)
                amqp: {url: "amqp://\(broker.address.user):\(broker.address.password)@127.0.0.1:\(brokerPort)/"}
                registry: {sqlite: \(directory.appendingPathComponent("registry.db").path)}
                queues: {exchange: \(prefix).push, jobs: \(prefix).jobs, dead_letter_exchange: \(prefix).dlx, dead_letters: \(prefix).dead, results: \(prefix).results, registry: \(prefix).registry}
                apps:
                \(fixture.appYAML())
                """)
        })
        try await worker.waitForLog("the broker cannot be reached yet")

        #expect(try await Self.poll(port: metricsPort, "/healthz") { _ in true }.status == 200)
        let notReady = try await Self.poll(port: metricsPort, "/readyz") { _ in true }
        #expect(notReady.status == 503)
        #expect(notReady.body.contains(#""ready":false"#))
        #expect(notReady.body.contains(#""broker":"publisher: cannot connect"#), "\(notReady.body)")
        #expect(notReady.body.contains(#""apps":"ok""#))
        #expect(worker.process.isRunning)
        // `pushworker health`, the image's HEALTHCHECK: not ready (1, saying why), but alive (0).
        let unhealthy = try await Program.running(["health", "--config", config.path])
        #expect(unhealthy.status == 1, "\(unhealthy.standardOutput)")
        #expect(unhealthy.standardError.contains("http://127.0.0.1:\(metricsPort)/readyz answered 503: ") && unhealthy.standardError.contains("publisher: cannot connect"), "\(unhealthy.standardError)")
        let alive = try await Program.running(["health", "--live", "--config", config.path])
        #expect(alive.status == 0 && alive.standardOutput == "http://127.0.0.1:\(metricsPort)/healthz answered 200\n", "\(alive.standardOutput)\(alive.standardError)")

        let relay = try TCPRelay(opening: closedBroker, targetHost: broker.address.host, targetPort: broker.address.port)
        defer { relay.stop() }
        let ready = try await Self.poll(port: metricsPort, "/readyz") { $0.status == 200 }
        // Each connection named with the node it is on, the password masked.
        let node = "amqp://\(broker.address.user):***@127.0.0.1:\(brokerPort)/"
        #expect(ready.body == #"{"ready":true,"checks":{"broker":"ok: publisher → \#(node), bulk publisher → \#(node), jobs → \#(node), bulk jobs → \#(node), tokens → \#(node), schedule → \#(node), registry-replies → \#(node), registry → \#(node)","topology":"ok","apps":"ok","registry":"ok"}}"# + "\n")
        let healthy = try await Program.running(["health", "--url", "http://127.0.0.1:\(metricsPort)"])
        #expect(healthy.status == 0 && healthy.standardOutput == "http://127.0.0.1:\(metricsPort)/readyz answered 200\n", "\(healthy.standardError)")
        // Logged as `run` begins, a moment after the last connection is up.
        try await worker.waitForLog("worker started")
        #expect(try await worker.stop() == 0, "\(worker.log)")
        // Nobody listening any more, or nothing to ask: 1, naming the address or the key.
        let gone = try await Program.running(["health", "--config", config.path, "--timeout", "3"])
        #expect(gone.status == 1 && gone.standardError.contains("http://127.0.0.1:\(metricsPort)/readyz: cannot connect to 127.0.0.1:\(metricsPort)"), "\(gone.standardError)")
        let gone6 = try await Program.running(["health", "--url", "http://[::1]:\(metricsPort)", "--timeout", "3"])
        #expect(gone6.status == 1 && gone6.standardError.contains("http://[::1]:\(metricsPort)/readyz: cannot connect to ::1:\(metricsPort)"), "\(gone6.standardError)")
        // A listener whose kernel completes the handshake and which never answers.
        let silent = try SilentListener()
        defer { withExtendedLifetime(silent) {} }  // open until the probes below are done
        let silentPort = silent.port
        let hung = try await Program.running(["health", "--url", "http://127.0.0.1:\(silentPort)", "--timeout", "1"])
        #expect(hung.status == 1 && hung.standardError.contains("http://127.0.0.1:\(silentPort)/readyz: no answer within 1.0 s"), "\(hung.standardError)")
        // PUSHWORKER_METRICS_ADDRESS is asked without the file.
        let fromEnvironment = try await Program.running(["health", "--config", "/nonexistent.yaml", "--timeout", "1"], environment: ["PUSHWORKER_METRICS_ADDRESS": "127.0.0.1:\(silentPort)"])
        #expect(fromEnvironment.status == 1 && fromEnvironment.standardError.contains("http://127.0.0.1:\(silentPort)/readyz: no answer"), "\(fromEnvironment.standardError)")
        let off = try MockAPNsFixture.writeConfiguration("metrics_address: null\napps: []\n")
        let nothing = try await Program.running(["health", "--config", off.path])
        #expect(nothing.status == 1 && nothing.standardError.contains("metrics_address is null"), "\(nothing.standardError)")
        let usage = try await Program.running(["health", "--url", "https://127.0.0.1:1/"])
        #expect(usage.status == 64 && usage.standardError.contains("--url: 'https://127.0.0.1:1/' is not http://HOST:PORT"), "\(usage.standardError)")
    }

    @Test("SIGTERM while the worker waits for an unreachable broker stops it at once, exit 0, having taken nothing")
    func stopWhileWaitingForTheBroker() async throws {
        let fixture = try await MockAPNsFixture.start()
        let mock = fixture.server
        defer { Task { try? await mock.shutdown() } }
        let prefix = TestBroker.uniqueName("waiting")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(prefix)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A registry too: its service waits for the broker beside the worker, and must stop as well.
        let down = try ClosedPort()
        defer { down.release() }
        let config = try MockAPNsFixture.writeConfiguration("""
            amqp: {url: "amqp://guest:guest@127.0.0.1:\(down.port)/"}
            registry: {sqlite: \(directory.appendingPathComponent("registry.db").path)}
            shutdown_grace_seconds: 120
            queues: {exchange: \(prefix).push, jobs: \(prefix).jobs, dead_letter_exchange: \(prefix).dlx, dead_letters: \(prefix).dead, results: \(prefix).results, registry: \(prefix).registry}
            apps:
            \(fixture.appYAML())
            """)
        let worker = try RunningProgram.worker(config: config)
        try await worker.waitForLog("the broker cannot be reached yet")
        // Well inside the 120 s grace: the waiting ends on the signal, not on the grace's end.
        #expect(try await worker.stop(within: .seconds(60)) == 0, "\(worker.log)")
        #expect(worker.log.contains("worker stopped before its broker could be reached"), "\(worker.log)")
    }

    @Test("a metrics_address already in use fails the start, naming the key")
    func addressInUse() async throws {
        let taken = try SilentListener()
        defer { withExtendedLifetime(taken) {} }
        let config = try MockAPNsFixture.writeConfiguration("""
            metrics_address: 127.0.0.1:\(taken.port)
            amqp: {url: "\(TestBroker.url)"}
            apps:
              - {name: demo, topic: com.example.app, environment: sandbox, url: "https://127.0.0.1:1", token: {key_file: \(MockAPNsFixture.path("key.p8")), key_id: \(MockAPNsFixture.keyID), team_id: \(MockAPNsFixture.teamID)}}
            """)
        let run = try await Program.running(["run", "--config", config.path])
        #expect(run.status != 0)
        #expect(run.standardError.contains("metrics_address"), "\(run.standardError)")
        #expect(run.standardError.contains("cannot listen on 127.0.0.1:\(taken.port)"), "\(run.standardError)")
        #expect(run.standardError.contains("PUSHWORKER_METRICS_ADDRESS"), "the way out is named: \(run.standardError)")
    }

    @Test("two workers from one configuration on one host: the second, given PUSHWORKER_METRICS_ADDRESS, serves its own port and both take jobs; without it, it refuses naming the key")
    func workersShareAHost() async throws {
        let fixture = try await MockAPNsFixture.start()
        let mock = fixture.server
        defer { Task { try? await mock.shutdown() } }
        let prefix = TestBroker.uniqueName("twohost")
        let (first, filePort, config) = try await RunningProgram.worker(onFreePort: { filePort in
            try MockAPNsFixture.writeConfiguration("""
                metrics_address: 127.0.0.1:\(filePort)
                amqp: {url: "\(TestBroker.url)", prefetch: 1}
                queues: {exchange: \(prefix).push, jobs: \(prefix).jobs, dead_letter_exchange: \(prefix).dlx, dead_letters: \(prefix).dead, results: \(prefix).results}
                apps:
                \(fixture.appYAML())
                """)
        })
        try await first.waitForLog("worker started")
        _ = try await Self.poll(port: filePort, "/readyz") { $0.status == 200 }

        // The same file again: the port is taken, and the error says which key and what to do.
        let refused = try await Program.running(["run", "--config", config.path])
        #expect(refused.status != 0)
        #expect(refused.standardError.contains("metrics_address: cannot listen on 127.0.0.1:\(filePort)"), "\(refused.standardError)")
        #expect(refused.standardError.contains("PUSHWORKER_METRICS_ADDRESS"), "\(refused.standardError)")
        // A bad override names the variable, not the file's key.
        let malformed = try await Program.running(["run", "--config", config.path], environment: ["PUSHWORKER_METRICS_ADDRESS": "9100"])
        #expect(malformed.status != 0)
        #expect(malformed.standardError.contains("PUSHWORKER_METRICS_ADDRESS: '9100' is not HOST:PORT"), "\(malformed.standardError)")

        // Port 0: the kernel picks one, and the log says which.
        let second = try RunningProgram.worker(config: config, environment: ["PUSHWORKER_METRICS_ADDRESS": "127.0.0.1:0"])
        try await second.waitForLog("worker started")
        let secondPort = try await second.metricsPort()
        #expect(secondPort != filePort && secondPort != 0, "\(second.log)")
        _ = try await Self.poll(port: secondPort, "/readyz") { $0.status == 200 }

        // Both consume (the broker hands a queue's messages round its consumers), each counting
        // on its own port.
        let publisher = try await TestBroker.publisher()
        let results = try await TestBroker.consumer(queue: "\(prefix).results", prefetch: 200)
        let jobs = 40
        for index in 0..<jobs {
            try await publisher.publish(.toQueue("\(prefix).jobs", body: Array(
                #"{"id": "host-\#(index)", "audience": {"tokens": ["\#(Self.token(index))"]}, "payload": {"aps": {"alert": "hi"}}}"#.utf8)))
        }
        var summaries = 0
        while summaries < jobs {
            let delivery = try await results.next(within: .seconds(30))
            try await delivery.ack()
            if delivery.properties.type == "summary" { summaries += 1 }
        }
        func done(_ port: Int) async throws -> Double {
            HTTPProbe.samples(try await Self.poll(port: port, "/metrics") { _ in true }.body).sum("pushworker_jobs_total", ["outcome": "done"])
        }
        // A counter may move just after its summary is published: wait for the two to add up.
        let deadline = ContinuousClock.now + .seconds(30)
        var counts = [try await done(filePort), try await done(secondPort)]
        while counts.reduce(0, +) < Double(jobs) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
            counts = [try await done(filePort), try await done(secondPort)]
        }
        #expect(counts.reduce(0, +) == Double(jobs) && counts.allSatisfy { $0 > 0 }, "jobs done per worker: \(counts)")
        #expect(try await first.stop() == 0, "\(first.log)")
        #expect(try await second.stop() == 0, "\(second.log)")
        await results.close()
        await publisher.close()
    }
}
