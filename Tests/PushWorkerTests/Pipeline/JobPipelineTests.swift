import AMQP
import APNs
import APNsHTTP2
import Foundation
import Logging
import PushWorker
import Synchronization
import TestSupport
import Testing

/// Every branch of the pipeline, in process: a scripted APNs and a recording broker, no network.
@Suite("The job pipeline, branch by branch")
struct JobPipelineTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0xC000) }
    static let results = "push.results"
    static let bulk = "push.jobs.bulk.demo"

    struct Harness {
        let sender: ScriptedSender
        let publisher: RecordingPublisher
        /// The now lane's pipeline, which takes producers' jobs.
        let pipeline: JobPipeline
        let bulk: JobPipeline

        init(
            script: [String: [ScriptedSender.Answer]] = [:], chunkSize: Int = 3, inProcessAttempts: Int = 3,
            resolver: any AudienceResolver = ExplicitTokenResolver(), queues: Set<String> = [JobPipelineTests.results],
            failure: @escaping @Sendable (AMQPMessage) -> AMQPError? = { _ in nil }
        ) {
            TestLog.bootstrap()
            var settings = WorkerSettings()
            settings.chunkSize = chunkSize
            settings.retryMaxAttempts = 3
            settings.retryInProcessAttempts = inProcessAttempts
            settings.retryInitialDelayMilliseconds = 1
            settings.retryDelaysMilliseconds = [100]
            sender = ScriptedSender(script)
            publisher = RecordingPublisher(queues: queues, failure: failure)
            // Few slots, as a busy app has: a job larger than them goes out in several batches.
            let apps = [JobPipeline.App(name: "demo", topic: "com.example.app", sender: sender, admission: DeviceAdmission(maxInFlight: 8))]
            pipeline = JobPipeline(settings: settings, lane: .now, apps: apps, publisher: publisher, resolver: resolver, logger: Logger(label: "test.pipeline"))
            bulk = JobPipeline(settings: settings, lane: .bulk, apps: apps, publisher: publisher, resolver: resolver, logger: Logger(label: "test.pipeline"))
        }

        func run(_ json: String, properties: AMQPProperties = AMQPProperties(messageID: "m-1")) async -> JobSettlement {
            await pipeline.run(JobDelivery(body: Array(json.utf8), properties: properties))
        }

        /// A message the pipeline published, fed back to the lane of the queue it went to, as the
        /// broker would deliver it (a retry job comes back to the jobs queue, the now lane).
        func run(_ message: AMQPMessage) async -> JobSettlement {
            await (message.routingKey == JobPipelineTests.bulk ? bulk : pipeline).run(JobDelivery(body: message.body, properties: message.properties))
        }
    }

    static func job(_ tokens: [Int], _ extra: String = "") -> String {
        #"{"id": "j", "audience": {"tokens": [\#(tokens.map { "\"\(token($0))\"" }.joined(separator: ","))]}, "payload": {"aps": {"alert": "hi"}}\#(extra)}"#
    }

    @Test("a job read whole: one request and one result per device, then the summary, then acknowledge")
    func whole() async throws {
        let harness = Harness(script: [Self.token(2): [.status(410, .unregistered)]])
        #expect(await harness.run(Self.job([1, 2, 3], #", "collapse_id": "c""#)) == .acknowledge)
        #expect(Set(harness.sender.sent.map(\.deviceToken)) == [Self.token(1), Self.token(2), Self.token(3)])
        #expect(harness.sender.sent.allSatisfy { $0.topic == "com.example.app" && $0.collapseID == "c" })
        let outcomes = Dictionary(uniqueKeysWithValues: try harness.publisher.results(to: Self.results).map { ($0.token, $0.outcome) })
        #expect(outcomes == [Self.token(1): .delivered, Self.token(2): .rejected, Self.token(3): .delivered])
        let summary = try #require(try harness.publisher.summaries(to: Self.results).first)
        #expect(summary.devices == 3 && summary.outcomes == [.delivered: 2, .rejected: 1] && summary.error == nil)
        // The summary comes last: a producer may stop reading there.
        #expect(harness.publisher.messages.last?.properties.type == "summary")
    }

    @Test("a device named twice, in any case, is sent once")
    func duplicates() async throws {
        let harness = Harness()
        let upper = Self.token(1).uppercased()
        #expect(await harness.run(#"{"audience": {"tokens": ["\#(Self.token(1))", "\#(upper)", "\#(Self.token(2))"]}, "payload": {"aps": {}}}"#) == .acknowledge)
        #expect(harness.sender.sent.count == 2)
        #expect(try harness.publisher.summaries(to: Self.results).first?.devices == 2)
    }

    @Test("an invalid job is dead-lettered with the reason, its producer told; nothing is sent")
    func invalid() async throws {
        let harness = Harness(queues: [Self.results, "mine"])
        let settlement = await harness.run(
            #"{"audience": {"tokens": []}, "payload": {}, "priority": 7}"#,
            properties: AMQPProperties(headers: ["producer": "p"], replyTo: "mine", messageID: "bad"))
        #expect(settlement == .acknowledge)
        #expect(harness.sender.sent.isEmpty)
        let letter = try #require(harness.publisher.messages.first { $0.exchange == "push.dlx" })
        #expect(letter.properties.headers?[WireHeader.error] == "invalid_field")
        #expect(letter.properties.headers?[WireHeader.errorField] == "priority")
        #expect(letter.properties.headers?["producer"] == "p")
        #expect(letter.body == Array(#"{"audience": {"tokens": []}, "payload": {}, "priority": 7}"#.utf8))
        #expect(try harness.publisher.summaries(to: "mine").first?.error?.code == .invalidField)
    }

    @Test("a refused job's summary names the body's id and app; the AMQP message id only for a body that cannot be read")
    func refusalNamesItsJob() async throws {
        let harness = Harness(queues: [Self.results, "mine"])
        let named = #"{"id": "news-42", "app": "nope", "audience": {"tokens": []}, "payload": {}, "reply_to": "mine"}"#
        #expect(await harness.run(named, properties: AMQPProperties(messageID: "amqp-1")) == .acknowledge)
        let first = try #require(try harness.publisher.summaries(to: "mine").first)
        #expect(first.jobID == "news-42" && first.app == "nope" && first.error?.code == .unknownApp)
        // No id in the body: the job's id is the message id, as for a valid job; the app as written.
        #expect(await harness.run(#"{"app": "demo", "audience": {}, "payload": {}}"#, properties: AMQPProperties(replyTo: "mine", messageID: "amqp-2")) == .acknowledge)
        let second = try #require(try harness.publisher.summaries(to: "mine").dropFirst().first)
        #expect(second.jobID == "amqp-2" && second.app == "demo" && second.error?.code == .emptyAudience)
        // Not JSON: nothing to read but the properties.
        #expect(await harness.run(#"{"id": "x", "#, properties: AMQPProperties(replyTo: "mine", messageID: "amqp-3")) == .acknowledge)
        let third = try #require(try harness.publisher.summaries(to: "mine").dropFirst(2).first)
        #expect(third.jobID == "amqp-3" && third.app == nil && third.error?.code == .invalidJSON)
    }

    @Test("a dead letter that cannot be published sends the job back to the queue")
    func deadLetterFails() async {
        let harness = Harness(failure: { $0.exchange == "push.dlx" ? AMQPError(.nacked, "no") : nil })
        #expect(await harness.run(#"{"audience": {}, "payload": {}}"#) == .requeue)
    }

    @Test("a reply queue that does not exist refuses the job before anything is sent")
    func missingReplyQueue() async throws {
        let harness = Harness()
        #expect(await harness.run(Self.job([1], #", "reply_to": "gone""#)) == .acknowledge)
        #expect(harness.sender.sent.isEmpty)
        let letter = try #require(harness.publisher.messages.first { $0.exchange == "push.dlx" })
        #expect(letter.properties.headers?[WireHeader.errorField] == "reply_to")
    }

    @Test("a large job is split into chunk jobs, each device once; nothing is sent by the splitting worker")
    func split() async throws {
        let harness = Harness()
        #expect(await harness.run(Self.job([1, 2, 3, 4, 2, 5])) == .acknowledge)
        #expect(harness.sender.sent.isEmpty)
        #expect(harness.publisher.messages(to: "push.jobs").isEmpty)
        // Chunks are published several at once: in any order here.
        let chunks = harness.publisher.messages(to: Self.bulk).sorted { ($0.properties.messageID ?? "") < ($1.properties.messageID ?? "") }
        #expect(chunks.map { $0.properties.headers?[WireHeader.chunk]?.stringValue } == ["1/2", "2/2"])
        #expect(chunks.map(\.properties.messageID) == ["j#1", "j#2"])
        // Each chunk is a job of its own, which the pipeline sends whole.
        for chunk in chunks { #expect(await harness.run(chunk) == .acknowledge) }
        #expect(harness.sender.sent.map(\.deviceToken).sorted() == [1, 2, 3, 4, 5].map(Self.token))
        #expect(try harness.publisher.summaries(to: Self.results).map(\.chunk).sorted { ($0 ?? "") < ($1 ?? "") } == ["1/2", "2/2"])
    }

    @Test("a chunk job is never split again, whatever its size; one on the now lane (back from a retry round) moves to the bulk lane as it is")
    func chunkNotSplit() async throws {
        let harness = Harness(chunkSize: 1)
        let properties = AMQPProperties(headers: [WireHeader.chunk: "2/7", "x-delivery-count": 1, "producer": "p"], messageID: "j#2")
        #expect(await harness.run(Self.job([1, 2, 3]), properties: properties) == .acknowledge)
        #expect(harness.sender.sent.isEmpty)
        let moved = try #require(harness.publisher.messages(to: Self.bulk).first)
        #expect(harness.publisher.messages.count == 1)
        #expect(moved.body == Array(Self.job([1, 2, 3]).utf8) && moved.properties.messageID == "j#2")
        #expect(moved.properties.headers?[WireHeader.chunk] == "2/7" && moved.properties.headers?["producer"] == "p")
        #expect(moved.properties.headers?["x-delivery-count"] == nil)
        #expect(await harness.run(moved) == .acknowledge)
        #expect(harness.sender.sent.count == 3)
        #expect(harness.publisher.messages(to: Self.bulk).count == 1 && harness.publisher.messages(to: "push.jobs").isEmpty)
        #expect(try harness.publisher.summaries(to: Self.results).first?.chunk == "2/7")
    }

    @Test("a job larger than lanes.now_max_devices but within a chunk goes to the bulk lane as one chunk")
    func nowMaxDevices() async throws {
        var settings = WorkerSettings()
        settings.lanes.nowMaxDevices = 2
        let sender = ScriptedSender([:])
        let publisher = RecordingPublisher(queues: [Self.results])
        let pipeline = JobPipeline(
            settings: settings, apps: [JobPipeline.App(name: "demo", topic: "com.example.app", sender: sender)], publisher: publisher,
            logger: Logger(label: "test.pipeline"))
        #expect(await pipeline.run(JobDelivery(body: Array(Self.job([1, 2]).utf8), properties: AMQPProperties(messageID: "a"))) == .acknowledge)
        #expect(sender.sent.count == 2 && publisher.messages(to: Self.bulk).isEmpty)
        #expect(await pipeline.run(JobDelivery(body: Array(Self.job([1, 2, 3]).utf8), properties: AMQPProperties(messageID: "b"))) == .acknowledge)
        #expect(sender.sent.count == 2)
        #expect(publisher.messages(to: Self.bulk).map { $0.properties.headers?[WireHeader.chunk]?.stringValue } == ["1/1"])
    }

    @Test("devices still failing after this worker's share are handed on with their attempts, and finish in the retry job")
    func retry() async throws {
        let harness = Harness(
            script: [Self.token(1): [.status(503, .serviceUnavailable)], Self.token(2): [.failure(.timeout("slow")), .status(503, nil)]],
            inProcessAttempts: 1)
        #expect(await harness.run(Self.job([1, 2, 3])) == .acknowledge)
        let handedOn = try #require(harness.publisher.messages(to: "push.jobs.retry.100ms").first)
        #expect(handedOn.properties.headers?[WireHeader.chunk] == "retry")
        #expect(handedOn.properties.headers?[WireHeader.retryRound]?.intValue == 1)
        #expect(try harness.publisher.summaries(to: Self.results).first?.retrying == 2)
        #expect(try harness.publisher.results(to: Self.results).map(\.token) == [Self.token(3)])

        // The retry job comes back: token 1 now gets 200 at its 2nd attempt, token 2 a 503 at its
        // 2nd and is handed on again.
        #expect(await harness.run(handedOn) == .acknowledge)
        let first = try #require(try harness.publisher.results(to: Self.results).first { $0.token == Self.token(1) })
        #expect(first.outcome == .delivered && first.attempts == 2)
        let again = try #require(harness.publisher.messages(to: "push.jobs.retry.100ms").last)
        #expect(again.properties.headers?[WireHeader.retryRound]?.intValue == 2)
        #expect(await harness.run(again) == .acknowledge)
        let second = try #require(try harness.publisher.results(to: Self.results).first { $0.token == Self.token(2) })
        #expect(second.outcome == .delivered && second.attempts == 3)
    }

    @Test("a retry job of an older worker names tokens: its attempts header still counts each device's sends")
    func olderRetryJob() async throws {
        let harness = Harness(script: [:])
        // Before resolved devices, a retry job named its tokens, and its header gave each one's
        // sends so far, in their order.
        var headers: AMQPTable = [:]
        headers[WireHeader.chunk] = .string("retry")
        headers[WireHeader.retryRound] = .int64(1)
        headers[WireHeader.attempts] = .array([.int64(2), .int64(1)])
        #expect(await harness.run(Self.job([1, 2]), properties: AMQPProperties(headers: headers, messageID: "m-r")) == .acknowledge)
        let results = try harness.publisher.results(to: Self.results)
        #expect(results.first { $0.token == Self.token(1) }?.attempts == 3, "\(results)")
        #expect(results.first { $0.token == Self.token(2) }?.attempts == 2, "\(results)")
    }

    @Test("chunk and retry jobs carry their devices resolved: only the splitting worker asks the resolver")
    func resolverForChunks() async throws {
        let resolver = CountingResolver()
        let harness = Harness(chunkSize: 2, resolver: resolver)
        #expect(await harness.run(Self.job([1, 2, 3])) == .acknowledge)
        for chunk in harness.publisher.messages(to: Self.bulk) { _ = await harness.run(chunk) }
        #expect(resolver.calls == 1)
        #expect(harness.sender.sent.count == 3)
    }

    @Test("a streamed job's tokens are split sorted and each once; a streamed invalid job is rejected to the broker's dead letters")
    func streamed() async throws {
        let harness = Harness(queues: [Self.results, "mine"])
        let reader = StreamedJobReader(bodySize: 1000)
        let body = Array(Self.job([5, 1, 3, 1, 4]).utf8)
        body.withUnsafeBytes { reader.receive(RawSpan(_unsafeBytes: $0)) }
        #expect(await harness.pipeline.run(JobDelivery(body: [], streamed: reader, properties: AMQPProperties(messageID: "s"))) == .acknowledge)
        let tokens = try harness.publisher.messages(to: Self.bulk).flatMap { message in
            try JSONDecoder().decode(ChunkAudience.self, from: Data(message.body)).audience.devices.map { $0[0] ?? "" }
        }
        #expect(tokens == [1, 3, 4, 5].map(Self.token))

        let bad = StreamedJobReader(bodySize: 1000)
        Array(#"{"audience": {"tokens": ["zz"]}, "payload": {}, "reply_to": "mine"}"#.utf8).withUnsafeBytes { bad.receive(RawSpan(_unsafeBytes: $0)) }
        let settlement = await harness.pipeline.run(JobDelivery(body: [], streamed: bad, properties: AMQPProperties(replyTo: "mine", messageID: "b")))
        #expect(settlement == .reject)
        #expect(try harness.publisher.summaries(to: "mine").first?.error?.code == .invalidToken)
    }

    @Test("results that cannot be confirmed send the job back to the queue, and stop the rest of it being sent")
    func publishFails() async {
        let harness = Harness(chunkSize: 100, failure: { $0.properties.type == "result" ? AMQPError(.nacked, "the broker refused") : nil })
        #expect(await harness.run(Self.job(Array(0..<50))) == .requeue)
        #expect(harness.sender.sent.count < 50, "\(harness.sender.sent.count) sent of a job going back to the queue")
    }

    @Test("a result the broker nacks a few times (a quorum queue between leaders) is published again: the job is acknowledged, each device reported once")
    func nackedResultsPublishedAgain() async throws {
        let nacks = Locked(0)
        let harness = Harness(chunkSize: 100, failure: { message in
            guard message.properties.type == "result" else { return nil }
            return nacks.withLock { count in
                count += 1
                return count <= 3 ? AMQPError(.nacked, "the broker refused") : nil
            }
        })
        #expect(await harness.run(Self.job(Array(1...5))) == .acknowledge)
        #expect(nacks.value == 3 + 5)
        #expect(try harness.publisher.results(to: Self.results).map(\.token).sorted() == (1...5).map { Self.token($0) }.sorted())
    }

    @Test("a split job reports its unresolved audience before its chunks, so nothing after the chunks can requeue it")
    func unresolvedBeforeChunks() async throws {
        let harness = Harness()
        let tokens = [1, 2, 3, 4].map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        #expect(await harness.run(#"{"id": "j", "audience": {"tokens": [\#(tokens)], "users": ["u"]}, "payload": {"aps": {}}}"#) == .acknowledge)
        let kinds = harness.publisher.messages.map { $0.routingKey == Self.results ? "summary" : "chunk" }
        #expect(kinds.first == "summary" && kinds.filter { $0 == "chunk" }.count == 2, "\(kinds)")
    }

    @Test("users and groups no resolver knows are reported in the summary's error; the tokens are sent")
    func unresolved() async throws {
        let harness = Harness()
        #expect(await harness.run(#"{"audience": {"tokens": ["\#(Self.token(1))"], "groups": ["staff"]}, "payload": {"aps": {}}}"#) == .acknowledge)
        #expect(harness.sender.sent.count == 1)
        let summary = try #require(try harness.publisher.summaries(to: Self.results).first)
        #expect(summary.error?.code == .unresolvedAudience && summary.error?.field == "audience.groups")
    }
}

/// Explicit tokens, counting how often it is asked.
final class CountingResolver: AudienceResolver {
    private let count = Mutex(0)
    var calls: Int { count.withLock { $0 } }

    func resolve(_ job: PushJob, explicit: ExplicitTokens, pageSize: Int, _ body: (any AudienceStream) async throws -> Void) async throws {
        count.withLock { $0 += 1 }
        try await ExplicitTokenResolver().resolve(job, explicit: explicit, pageSize: pageSize, body)
    }
}

/// The part of a chunk job the streamed test reads back.
struct ChunkAudience: Decodable {
    struct Audience: Decodable { let devices: [[String?]] }
    let audience: Audience
}
