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
}
