import AMQP
import APNs
import Foundation
import Logging
import PushWorker
import Registry
import TestSupport
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
        let publisher = RecordingPublisher(queues: [LedgerPipelineTests.results])
        let ledger: SQLiteDeliveryLedger
        let writer: LedgerWriter
        let pipeline: JobPipeline
        let writing: Task<Void, Error>

        init() throws {
            TestLog.bootstrap()
            ledger = try SQLiteDeliveryLedger(path: FileManager.default.temporaryDirectory.appendingPathComponent("pipeline-ledger-\(UUID().uuidString.prefix(8)).db").path)
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
        // The first time, two of four devices got their result before the worker was lost.
        try await harness.ledger.write([1, 2].map {
            DeliveryRecord(jobID: "back", app: "demo", token: Self.token($0), outcome: $0 == 1 ? "delivered" : "rejected", attempts: 1, at: 1_795_000_000_000)
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
