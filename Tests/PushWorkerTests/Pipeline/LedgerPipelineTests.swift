import AMQP
import APNs
import Foundation
import Logging
import PushWorker
import SQLiteStores
import Stores
import TestSupport
import Synchronization
import Testing

/// The pipeline with a ledger (a real SQLite file and the real writer): every device's final
/// result is kept once published, and a job that comes back sends and publishes nothing for the
/// devices the ledger holds.
@Suite("The job pipeline with a delivery ledger")
struct LedgerPipelineTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0x7ED9) }
    static let results = "push.results"

    struct Harness {
        let sender = ScriptedSender()
        let publisher: RecordingPublisher
        let ledger: SQLiteLedgerStore
        let writer: LedgerWriter
        let pipeline: JobPipeline
        let writing: Task<Void, Error>

        init(failure: @escaping @Sendable (AMQPMessage) -> AMQPError? = { _ in nil }) throws {
            TestLog.bootstrap()
            publisher = RecordingPublisher(queues: [LedgerPipelineTests.results], failure: failure)
            let publisher = publisher
            ledger = try SQLiteLedgerStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("pipeline-ledger-\(UUID().uuidString.prefix(8)).db").path)
            writer = LedgerWriter(ledger: ledger, retentionDays: 30, logger: Logger(label: "test.ledger"))
            let writer = writer
            writing = Task { try await writer.run() }
            var settings = WorkerSettings()
            settings.chunkSize = 100
            let apps = [JobPipeline.App(name: "demo", topic: "com.example.app", sender: sender, admission: DeviceAdmission(maxInFlight: 8))]
            pipeline = JobPipeline(settings: settings, lane: .now, apps: apps, publisher: publisher, ledger: writer, logger: Logger(label: "test.ledger"))
        }

        func run(_ json: String, redelivered: Bool = false) async -> JobSettlement {
            await pipeline.run(JobDelivery(body: Array(json.utf8), properties: AMQPProperties(messageID: "m-1"), redelivered: redelivered))
        }
    }

    static func job(_ id: String, _ tokens: [Int], results: String = "all") -> String {
        #"{"id": "\#(id)", "results": "\#(results)", "audience": {"tokens": [\#(tokens.map { "\"\(token($0))\"" }.joined(separator: ","))]}, "payload": {"aps": {"alert": "hi"}}}"#
    }

    @Test("each device's final result is in the ledger by the time its summary is published", arguments: ["all", "batched", "failures", "none"])
    func kept(_ results: String) async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("k-\(results)", [1, 2, 3], results: results)) == .acknowledge)
        let records = try await harness.ledger.deliveries(DeliveryQuery(.job("k-\(results)")))
        #expect(Set(records.map(\.token)) == Set([1, 2, 3].map(Self.token)))
        #expect(records.allSatisfy { $0.outcome == "delivered" && $0.status == 200 && $0.app == "demo" && $0.attempts == 1 && $0.apnsID != nil })
    }

    @Test("a job redelivered after a fault sends and publishes nothing for the devices the ledger holds; its summary counts every device")
    func comesBack() async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        // The first time, two of four devices got their result before the worker was lost. Stamped
        // now: the harness's writer expires records past the retention by the real clock.
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
        try await harness.ledger.write([1, 2].map {
            DeliveryRecord(jobID: "back", app: "demo", token: Self.token($0), outcome: $0 == 1 ? "delivered" : "rejected", attempts: 1, at: now)
        })
        #expect(await harness.run(Self.job("back", [1, 2, 3, 4]), redelivered: true) == .acknowledge)
        #expect(Set(harness.sender.sent.map(\.deviceToken)) == Set([3, 4].map(Self.token)))
        #expect(Set(try harness.publisher.results(to: Self.results).map(\.token)) == Set([3, 4].map(Self.token)))
        let summary = try #require(try harness.publisher.summaries(to: Self.results).first)
        #expect(summary.devices == 4 && summary.outcomes == [.delivered: 3, .rejected: 1], "\(summary)")
        // Not redelivered (a new job of the same id would have another id): the ledger is not asked.
        #expect(await harness.run(Self.job("back", [1])) == .acknowledge)
        #expect(harness.sender.sent.count == 3)
    }

    @Test("results batched: a job that comes back publishes from the ledger, without a push, the results kept there whose message was never marked confirmed; its summary counts them; a further return publishes none")
    func answeredFromLedger() async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
        // The first time: devices 1 and 2 were sent and kept, packed in message 11 (confirmed)
        // and 12 (the worker was lost before its confirm); 3 and 4 were not sent.
        // Message 12 also held device 5, which a chunk split otherwise would bring back alone.
        let unconfirmed = DeliveryRecord(
            jobID: "packed", app: "demo", token: Self.token(2), outcome: "rejected", status: 410, reason: "Unregistered", apnsID: "A-2", attempts: 2,
            at: now, timestamp: 1_700_000_000_123, resultsMessage: 12)
        try await harness.ledger.write([
            DeliveryRecord(jobID: "packed", app: "demo", token: Self.token(1), outcome: "delivered", status: 200, attempts: 1, at: now, resultsMessage: 11),
            unconfirmed,
            DeliveryRecord(jobID: "packed", app: "demo", token: Self.token(5), outcome: "delivered", status: 200, attempts: 1, at: now, resultsMessage: 12),
        ])
        try await harness.ledger.confirm(job: "packed", app: "demo", messages: [11], answered: [], at: now)
        #expect(await harness.run(Self.job("packed", [1, 2, 3, 4], results: "batched"), redelivered: true) == .acknowledge)
        #expect(Set(harness.sender.sent.map(\.deviceToken)) == Set([3, 4].map(Self.token)))
        let published = try harness.publisher.packedResults(to: Self.results)
        #expect(Set(published.map(\.token)) == Set([2, 3, 4].map(Self.token)))
        // Field for field what the first attempt would have published.
        let again = try #require(published.first { $0.token == Self.token(2) })
        #expect(again.outcome == .rejected && again.status == 410 && again.reason == "Unregistered" && again.apnsID == "A-2" && again.attempts == 2
                && again.timestamp == 1_700_000_000_123 && again.jobID == "packed" && again.app == "demo", "\(again)")
        let summary = try #require(try harness.publisher.summaries(to: Self.results).first)
        #expect(summary.devices == 4 && summary.fromLedger == 1 && summary.outcomes == [.delivered: 3, .rejected: 1], "\(summary)")
        // The message that carried it confirmed the one it answered: nothing is unconfirmed now.
        let held = try await harness.ledger.finals(job: "packed", app: "demo", tokens: [1, 2, 3, 4].map(Self.token))
        #expect(held.count == 4 && held.values.allSatisfy { $0.resultsMessage == nil }, "\(held)")
        #expect(held[Self.token(2)]?.timestamp == 1_700_000_000_123)
        #expect(await harness.run(Self.job("packed", [1, 2, 3, 4], results: "batched"), redelivered: true) == .acknowledge)
        #expect(harness.sender.sent.count == 2)
        #expect(try harness.publisher.packedResults(to: Self.results).count == 3)
        #expect(try harness.publisher.summaries(to: Self.results).last?.fromLedger == 0)
        // Answering device 2 settled device 2's record, not the whole of message 12: device 5,
        // coming back on its own, is still answered from the ledger.
        #expect(await harness.run(Self.job("packed", [5], results: "batched"), redelivered: true) == .acknowledge)
        #expect(harness.sender.sent.count == 2)
        #expect(try harness.publisher.packedResults(to: Self.results).map(\.token).last == Self.token(5))
        #expect(try harness.publisher.summaries(to: Self.results).last?.fromLedger == 1)
    }

    @Test("results all: a result the broker would not take is kept in the ledger as not confirmed; the job goes back, and when it comes back that result is published from the ledger, not pushed again")
    func unpublishedResultKept() async throws {
        let failed = Mutex(false)
        let harness = try Harness(failure: { message in
            // The first result of device 2 meets a broker that closed the channel.
            guard message.properties.type == "result", String(decoding: message.body, as: UTF8.self).contains(LedgerPipelineTests.token(2)) else { return nil }
            return failed.withLock { done in
                defer { done = true }
                return done ? nil : AMQPError(.brokerClosed, "channel closed")
            }
        })
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("unpublished", [1, 2, 3])) != .acknowledge)
        #expect(harness.sender.sent.filter { $0.deviceToken == Self.token(2) }.count == 1)
        await harness.writer.sync()
        let held = try await harness.ledger.finals(job: "unpublished", app: "demo", tokens: [Self.token(2)])
        #expect(held[Self.token(2)]?.resultsMessage != nil, "kept, as not confirmed: \(held)")
        #expect(await harness.run(Self.job("unpublished", [1, 2, 3]), redelivered: true) == .acknowledge)
        #expect(harness.sender.sent.filter { $0.deviceToken == Self.token(2) }.count == 1, "device 2 pushed again")
        #expect(try harness.publisher.results(to: Self.results).filter { $0.token == Self.token(2) }.count == 1)
        #expect(try harness.publisher.summaries(to: Self.results).last?.fromLedger == 1)
        let after = try await harness.ledger.finals(job: "unpublished", app: "demo", tokens: [Self.token(2)])
        #expect(after[Self.token(2)]?.resultsMessage == nil, "settled once published: \(after)")
    }

    @Test("results batched: every device kept in the ledger, and every results message marked confirmed once published")
    func batchedRecordsFirst() async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("packed-first", Array(1...20), results: "batched")) == .acknowledge)
        let held = try await harness.ledger.finals(job: "packed-first", app: "demo", tokens: (1...20).map(Self.token))
        #expect(held.count == 20 && held.values.allSatisfy { $0.resultsMessage == nil }, "every message marked confirmed once published")
        #expect(try harness.publisher.packedResults(to: Self.results).count == 20)
    }

    @Test("a job with an idempotency key is sent once: a second job of the key gets a summary naming the first and nothing is pushed; a redelivery of the first goes on")
    func idempotencyKey() async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        let first = #"{"id": "promo-1", "idempotency_key": "spring-sale", "audience": {"tokens": ["\#(Self.token(1))"]}, "payload": {"aps": {"alert": "hi"}}}"#
        #expect(await harness.run(first) == .acknowledge)
        #expect(await harness.run(first.replacingOccurrences(of: "promo-1", with: "promo-2")) == .acknowledge)
        #expect(harness.sender.sent.count == 1)
        let summaries = try harness.publisher.summaries(to: Self.results)
        #expect(summaries.count == 2)
        #expect(summaries[1].jobID == "promo-2" && summaries[1].duplicateOf == "promo-1" && summaries[1].devices == 0, "\(summaries[1])")
        #expect(summaries[0].duplicateOf == nil)
        // The first job again, redelivered after a fault: not a duplicate (its device, in the ledger, is not sent again).
        #expect(await harness.run(first, redelivered: true) == .acknowledge)
        #expect(harness.sender.sent.count == 1)
        #expect(try harness.publisher.summaries(to: Self.results).last?.duplicateOf == nil)
    }

    @Test("an idempotency key on a worker without a ledger is refused naming the field; a malformed key too")
    func idempotencyWithoutLedger() async throws {
        TestLog.bootstrap()
        let sender = ScriptedSender()
        let publisher = RecordingPublisher(queues: [Self.results])
        let apps = [JobPipeline.App(name: "demo", topic: "com.example.app", sender: sender)]
        let pipeline = JobPipeline(settings: WorkerSettings(), apps: apps, publisher: publisher, logger: Logger(label: "test.ledger"))
        let job = #"{"id": "p", "idempotency_key": "k", "audience": {"tokens": ["\#(Self.token(1))"]}, "payload": {"aps": {}}}"#
        #expect(await pipeline.run(JobDelivery(body: Array(job.utf8), properties: AMQPProperties(replyTo: Self.results, messageID: "m"))) == .acknowledge)
        #expect(sender.sent.isEmpty)
        let letter = try #require(publisher.messages.first { $0.exchange == "push.dlx" })
        #expect(letter.properties.headers?[WireHeader.errorField] == "idempotency_key")
        let harness = try Harness()
        defer { harness.writing.cancel() }
        let long = String(repeating: "k", count: 256)
        #expect(await harness.run(job.replacingOccurrences(of: #""k""#, with: "\"\(long)\"")) == .acknowledge)
        #expect(harness.publisher.messages.first { $0.exchange == "push.dlx" }?.properties.headers?[WireHeader.errorField] == "idempotency_key")
        #expect(harness.sender.sent.isEmpty)
    }
}
