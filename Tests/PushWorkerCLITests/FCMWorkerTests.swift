import AMQP
import Foundation
import MockAPNs
import PushWorker
import SQLiteStores
import Stores
import TestSupport
import Testing

/// Android devices through the worker process: one job reaching an iPhone on APNs and Android
/// devices on FCM (the mock's, over real TLS and HTTP/2), results of one shape for both.
@Suite("pushworker run: one job for iPhones and Android devices", .usesBroker)
struct FCMWorkerTests {
    static func android(_ name: String) -> String { "\(name)0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22) }

    /// The results of the job `running` was given, up to its summary.
    static func job(of running: JobContractTests.Running) async throws -> (results: [PushResult], summary: JobSummary) {
        var results: [PushResult] = []
        while true {
            let reply = try await JobContractTests.Running.reply(from: running.results)
            if let result = reply.result { results.append(result) }
            if let summary = reply.summary { return (results, summary) }
        }
    }

    @Test("a job with tokens and fcm_tokens: the notification reaches both, FCM's answers become results with the platform and message name; UNREGISTERED is rejected, UNAVAILABLE retried")
    func bothPlatforms() async throws {
        let (good, gone, busy) = (Self.android("good"), Self.android("gone"), Self.android("busy"))
        let setup = try await WorkerProcessTests.setUp(faults: [], fcm: { configuration in
            configuration.fcmUnregisteredTokens = [gone]
            configuration.fcmFailures = [busy: MockFCMFailure(status: 503, code: "UNAVAILABLE", times: 1)]
        })
        let running = try await JobContractTests.Running.start(setup: setup)
        let iphone = WorkerProcessTests.token(0)
        try await running.publish(#"""
            {"id": "both-1", "audience": {"tokens": ["\#(iphone)"], "fcm_tokens": ["\#(good)", "\#(gone)", "\#(busy)"]},
             "notification": {"title": "Goal", "body": "2-1"}, "fcm": {"data": {"match": "7"}}, "priority": 10, "collapse_id": "score"}
            """#)
        let (list, summary) = try await Self.job(of: running)
        let results = Dictionary(list.map { ($0.token, $0) }, uniquingKeysWith: { _, last in last })
        #expect(summary.devices == 4 && summary.outcomes == [.delivered: 3, .rejected: 1], "\(summary)")
        #expect(results[iphone]?.outcome == .delivered && results[iphone]?.platform == nil && results[iphone]?.apnsID != nil)
        let delivered = try #require(results[good])
        #expect(delivered.outcome == .delivered && delivered.platform == .fcm && delivered.status == 200)
        #expect(delivered.fcmName?.hasPrefix("projects/\(TestServiceAccount.projectID)/messages/") == true)
        #expect(results[gone]?.outcome == .rejected && results[gone]?.reason == "UNREGISTERED" && results[gone]?.status == 404)
        #expect(results[busy]?.outcome == .delivered && results[busy]?.attempts == 2)

        // What each service got: APNs the alert made from the notification; FCM the message with the job's options.
        let apns = try #require(running.mock.recorded.first { $0.token == iphone })
        let aps = (try JSONSerialization.jsonObject(with: Data(apns.payload)) as? [String: Any])?["aps"] as? [String: Any]
        #expect(aps?["alert"] as? [String: String] == ["title": "Goal", "body": "2-1"])
        let messages = running.mock.fcmMessages
        #expect(Set(messages.map(\.token)) == [good, busy] && messages.count == 2)
        let first = try #require(messages.first)
        let message = try #require((try JSONSerialization.jsonObject(with: Data(first.message)) as? [String: Any])?["message"] as? [String: Any])
        #expect(message["notification"] as? [String: String] == ["title": "Goal", "body": "2-1"] && message["data"] as? [String: String] == ["match": "7"])
        let options = try #require(message["android"] as? [String: Any])
        #expect(options["priority"] as? String == "high" && options["collapse_key"] as? String == "score")
        #expect(running.mock.fcmGrants.issued == 1)

        // An Android token where an APNs one goes, and a job FCM would refuse: dead-lettered, naming the field.
        try await running.publish(#"{"id": "wrong-1", "audience": {"tokens": ["\#(good)"]}, "payload": {"aps": {}}}"#)
        let dead = try await JobContractTests.Running.next(from: running.dead)
        #expect(dead.properties.headers?["x-pushworker-error-field"]?.stringValue == "audience.tokens[0]", "\(dead.properties.headers ?? [:])")
        try await running.publish(#"{"id": "wrong-2", "audience": {"fcm_tokens": ["\#(good)"]}, "fcm": {"data": {"n": 7}}}"#)
        let refused = try await JobContractTests.Running.next(from: running.dead)
        #expect(refused.properties.headers?["x-pushworker-error-field"]?.stringValue == "fcm.data.n", "\(refused.properties.headers ?? [:])")
        #expect(running.mock.fcmMessages.count == 2)
        try await running.stop()
    }

    @Test("an FCM request whose answer is lost with its connection is sent again, and the device's result counts both sends")
    func lostAnswerCounted() async throws {
        let lost = Self.android("lost")
        // The mock takes the message (it may show on the phone), then resets the connection before answering.
        let setup = try await WorkerProcessTests.setUp(
            faults: [MockAPNsFault(.goAwayAbrupt(afterRequests: 0), tokens: [lost], times: 1)], extra: "metrics_address: 127.0.0.1:0", fcm: { _ in })
        let running = try await JobContractTests.Running.start(setup: setup)
        let metricsPort = try await running.worker.metricsPort()
        try await running.publish(#"{"id": "lost-1", "audience": {"fcm_tokens": ["\#(lost)"]}, "notification": {"title": "Hi"}}"#)
        let (results, summary) = try await Self.job(of: running)
        #expect(summary.outcomes == [.delivered: 1], "\(summary)")
        // Taken twice: once by the connection that was reset, once answered (and again, should a
        // busy machine time a request out): the result counts every request the mock took.
        let taken = running.mock.fcmMessages.count { $0.token == lost }
        #expect(running.mock.recorded.isEmpty && taken >= 2, "\(running.mock.recorded.count) recorded as APNs notifications, \(taken) as FCM messages")
        #expect(results.count == 1 && results.first?.outcome == .delivered && results.first?.attempts == taken, "\(results), \(taken) taken")
        // The request after the reset was the client's re-send (a request timed out on a busy
        // machine is the worker's retry, in `taken` but not a re-send).
        let page = try #require(await HTTPProbe.get(port: metricsPort, "/metrics"))
        let samples = HTTPProbe.samples(page.body)
        let resent = samples.sum("pushworker_fcm_resends_total", ["app": "demo", "cause": "connection"])
        #expect(resent >= 1 && resent <= Double(taken - 1), "\(resent) re-sends counted, \(taken) taken")
        #expect(samples.sum("pushworker_fcm_resends_total", ["cause": "access_token"]) == 0)
        try await running.stop()
    }

    @Test("an FCM request whose re-sends all lose their connection counts the attempt once; the worker's retry then delivers it")
    func resendsRanOut() async throws {
        let gone = Self.android("resets")
        // The first request and the client's three re-sends each lose their connection unanswered.
        let setup = try await WorkerProcessTests.setUp(faults: [MockAPNsFault(.resetConnection(afterRequests: 0), tokens: [gone], times: 4)], fcm: { _ in })
        let running = try await JobContractTests.Running.start(setup: setup)
        try await running.publish(#"{"id": "resets-1", "audience": {"fcm_tokens": ["\#(gone)"]}, "notification": {"title": "Hi"}}"#)
        let (results, summary) = try await Self.job(of: running)
        #expect(summary.outcomes == [.delivered: 1], "\(summary)")
        // 1 for the try that ran out of re-sends, 1 for the retry (2 should a busy machine time it out).
        #expect(results.count == 1 && results.first?.outcome == .delivered && (2...3).contains(results.first?.attempts ?? 0), "\(results)")
        #expect(running.mock.fcmMessages.count { $0.token == gone } >= 1)
        try await running.stop()
    }

    @Test("a group job through the registry: each member's iPhone on APNs and Android phone on FCM, the APNs alert shown on Android; an UNREGISTERED Android phone leaves the registry")
    func registryGroup() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString.prefix(8)).db").path
        let store = try SQLiteRegistryStore(path: file)
        let (pixel, gone) = (Self.android("pixel"), Self.android("gonegone"))
        let (iphone, other) = (WorkerProcessTests.token(1), WorkerProcessTests.token(2))
        for command in [
            RegistryCommand.registerDevice(app: "demo", token: iphone, user: "ada"),
            .registerDevice(app: "demo", token: pixel, user: "ada", platform: .fcm),
            .registerDevice(app: "demo", token: other, user: "bob"),
            .registerDevice(app: "demo", token: gone, user: "bob", platform: .fcm),
            .addToGroup(user: "ada", group: "class", createGroup: true), .addToGroup(user: "bob", group: "class", createGroup: true),
        ] {
            try await store.apply(command)
        }
        let setup = try await WorkerProcessTests.setUp(faults: [], extra: "registry: {sqlite: \(file)}", fcm: { $0.fcmUnregisteredTokens = [gone] })
        let running = try await JobContractTests.Running.start(setup: setup)
        // Ada's phone named as well is sent once; a phone nobody registered is sent as named.
        let unknown = Self.android("notregistered")
        try await running.publish(#"""
            {"id": "class-1", "audience": {"groups": ["class"], "fcm_tokens": ["\#(pixel)", "\#(unknown)"]}, "payload": {"aps": {"alert": {"title": "Class", "body": "Moved to room 4"}}}}
            """#)
        let (list, summary) = try await Self.job(of: running)
        let results = Dictionary(list.map { ($0.token, $0) }, uniquingKeysWith: { _, last in last })
        #expect(summary.devices == 5 && summary.outcomes == [.delivered: 4, .rejected: 1] && summary.removed == 1, "\(summary)")
        #expect(results[iphone]?.platform == nil && results[other]?.outcome == .delivered)
        #expect(results[unknown]?.platform == .fcm && results[unknown]?.outcome == .delivered && results[unknown]?.user == nil)
        #expect(results[pixel]?.platform == .fcm && results[pixel]?.outcome == .delivered && results[pixel]?.user == "ada")
        #expect(results[gone]?.reason == "UNREGISTERED" && results[gone]?.user == "bob")
        #expect(running.mock.fcmMessages.count { $0.token == pixel } == 1)
        let first = try #require(running.mock.fcmMessages.first { $0.token == pixel })
        let message = try #require((try JSONSerialization.jsonObject(with: Data(first.message)) as? [String: Any])?["message"] as? [String: Any])
        #expect(first.token == pixel && message["notification"] as? [String: String] == ["title": "Class", "body": "Moved to room 4"])
        #expect(try await store.device(app: "demo", token: gone) == nil)
        #expect(try await store.device(app: "demo", token: pixel)?.platform == .fcm)
        try await running.stop()
    }

    @Test("a job naming more devices than a chunk, iPhones and Android phones: split into chunk jobs like any other, each device reached once (or as often as its attempts say), on its own service")
    func splitsAndroidTokens() async throws {
        let setup = try await WorkerProcessTests.setUp(faults: [], extra: "chunk_size: 40\nlanes: {now_max_devices: 40}", fcm: { _ in })
        let running = try await JobContractTests.Running.start(setup: setup)
        let iphones = (0..<30).map { WorkerProcessTests.token(500 + $0) }
        let androids = (0..<150).map { Self.android("split\(String(format: "%04d", $0))") }
        let list = { (tokens: [String]) in tokens.map { "\"\($0)\"" }.joined(separator: ",") }
        try await running.publish(#"""
            {"id": "split-1", "audience": {"tokens": [\#(list(iphones))], "fcm_tokens": [\#(list(androids))]}, "notification": {"title": "Sale"}}
            """#)
        var results: [String: PushResult] = [:]
        var chunks = 0
        while chunks < 5 {
            let reply = try await JobContractTests.Running.reply(from: running.results)
            if let result = reply.result {
                #expect(results[result.token] == nil, "\(result.token) answered twice")
                results[result.token] = result
            }
            if let summary = reply.summary {
                #expect(summary.chunk != nil && summary.devices <= 40, "\(summary)")
                chunks += 1
            }
        }
        #expect(Set(results.keys) == Set(iphones + androids))
        #expect(results.values.allSatisfy { $0.outcome == .delivered })
        #expect(androids.allSatisfy { results[$0]?.platform == .fcm } && iphones.allSatisfy { results[$0]?.platform == nil })
        // Once each; a device sent again (a request that timed out on a machine too busy to read
        // its answer, or one lost with its connection) says so in its result's attempts.
        let sends = Dictionary(grouping: running.mock.fcmMessages, by: \.token).mapValues(\.count)
        #expect(Set(sends.keys) == Set(androids))
        #expect(androids.allSatisfy { sends[$0, default: 0] <= results[$0]?.attempts ?? 1 }, "sends \(sends.filter { $0.value > 1 }), results \(results.filter { $0.value.attempts > 1 })")
        #expect(Set(running.mock.recorded.map(\.token)) == Set(iphones))
        try await running.stop()
    }

    @Test("two workers sending for one service account ask Google for one access token: the second adopts the first's, and sends with it alone")
    func oneAccessTokenForTheFleet() async throws {
        let setup = try await WorkerProcessTests.setUp(faults: [], fcm: { _ in })
        defer { Task { try? await setup.mock.shutdown() } }
        let topology = AMQPTopology(queues: [.durable("\(setup.prefix).results")])
        let publisher = try await TestBroker.publisher(topology: topology)
        let results = try await TestBroker.consumer(queue: "\(setup.prefix).results", topology: topology)
        func send(_ ids: [String]) async throws {
            for id in ids {
                let job = #"{"id": "\#(id)", "audience": {"fcm_tokens": ["\#(Self.android(id))"]}, "notification": {"title": "Hi"}, "results": "none"}"#
                try await publisher.publish(.toQueue("\(setup.prefix).jobs", body: Array(job.utf8), properties: AMQPProperties(persistent: true)))
            }
            var summaries: Set<String> = []
            while summaries.count < ids.count {
                let delivery = try await results.next(within: .seconds(60))
                try await delivery.ack()
                let summary = try JSONDecoder().decode(JobSummary.self, from: Data(delivery.body))
                #expect(summary.outcomes == [.delivered: 1], "\(summary)")
                summaries.insert(summary.jobID)
            }
        }

        let first = try RunningProgram.worker(config: setup.config)
        try await first.waitForLog("worker started")
        try await send(["first"])
        #expect(setup.mock.fcmGrants.issued == 1)
        #expect(first.log.contains("FCM access token granted"), "\(first.log)")

        // The second asks the fleet as it starts; once the first has stopped, it sends alone.
        let second = try RunningProgram.worker(config: setup.config)
        try await second.waitForLog("FCM access token adopted from the fleet")
        #expect(try await first.stop() == 0, "\(first.log)")
        try await send((0..<8).map { "second-\($0)" })
        #expect(setup.mock.fcmGrants.issued == 1, "the second worker asked Google for a token of its own")
        #expect(setup.mock.fcmMessages.count == 9)
        #expect(!second.log.contains("FCM access token granted"), "\(second.log)")
        #expect(try await second.stop() == 0, "\(second.log)")
        await results.close()
        await publisher.close()
    }
}
