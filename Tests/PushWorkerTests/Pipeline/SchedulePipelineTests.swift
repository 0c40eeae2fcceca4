import AMQP
import APNs
import Foundation
import Logging
import PushWorker
import SQLiteStores
import Stores
import TestSupport
import Testing

/// The pipeline with a schedule (a real SQLite file) and a clock the test moves: a job whose
/// `send_at` is ahead is held, answered with a summary, and sent only once the releaser has put
/// it back on the jobs queue at its time.
@Suite("The job pipeline with a schedule")
struct SchedulePipelineTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0x5C4E) }
    static let results = "push.results"
    /// 2026-11-27T09:00:00Z
    static let start: Int64 = 1_795_770_000_000

    struct Harness {
        let sender = ScriptedSender()
        let publisher = RecordingPublisher(queues: [SchedulePipelineTests.results])
        let schedule: SQLiteScheduleStore
        let pipeline: JobPipeline
        /// The bulk lane's, which sends chunk jobs.
        let bulk: JobPipeline
        let releaser: ScheduleReleaser
        let advance: @Sendable (Int64) -> Void
        let writing: Task<Void, Error>

        init(horizonDays: Int = 30, chunkSize: Int = 1000) throws {
            TestLog.bootstrap()
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("pipeline-schedule-\(UUID().uuidString.prefix(8)).db").path
            let ledger = try SQLiteLedgerStore(path: path)
            schedule = try SQLiteScheduleStore(ledger: ledger)
            let (clock, advance) = WallClock.manual(SchedulePipelineTests.start)
            self.advance = advance
            let scheduler = JobScheduler(store: schedule, clock: clock, horizonDays: horizonDays)
            let logger = Logger(label: "test.schedule")
            let writer = LedgerWriter(ledger: ledger, retentionDays: 30, logger: logger)
            writing = Task { try await writer.run() }
            let apps = [JobPipeline.App(name: "demo", topic: "com.example.app", sender: sender, admission: DeviceAdmission(maxInFlight: 8))]
            var settings = WorkerSettings()
            settings.chunkSize = chunkSize
            pipeline = JobPipeline(settings: settings, lane: .now, apps: apps, publisher: publisher, ledger: writer, scheduler: scheduler, logger: logger)
            bulk = JobPipeline(settings: settings, lane: .bulk, apps: apps, publisher: publisher, ledger: writer, scheduler: scheduler, logger: logger)
            releaser = ScheduleReleaser(
                scheduler: scheduler, queues: WorkerSettings().queues, retentionDays: 30, connect: { throw AMQPError(.connectionFailed, "not in this test") },
                logger: logger)
        }

        func run(_ json: String, properties: AMQPProperties = AMQPProperties(replyTo: nil, messageID: "m-1")) async -> JobSettlement {
            await pipeline.run(JobDelivery(body: Array(json.utf8), properties: properties))
        }

        /// Runs what the releaser put on the due queue through the pipeline, as a worker would.
        func runReleased() async -> [JobSettlement] {
            var settlements: [JobSettlement] = []
            for message in publisher.messages(to: WorkerSettings().queues.dueJobs) {
                settlements.append(await pipeline.run(JobDelivery(body: message.body, properties: message.properties, queue: WorkerSettings().queues.dueJobs)))
            }
            return settlements
        }
    }

    static func job(_ id: String, sendAt: String, extra: String = "") -> String {
        #"{"id": "\#(id)", "send_at": \#(sendAt), "audience": {"tokens": ["\#(token(1))", "\#(token(2))"]}, "payload": {"aps": {"alert": "hi"}}\#(extra)}"#
    }

    @Test("a job whose send_at is ahead is held: nothing sent, a summary saying when; released at its time, it is sent once")
    func heldThenReleased() async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("later", sendAt: #""2026-11-27T10:00:30+01:00""#)) == .acknowledge)  // 09:00:30Z
        #expect(await harness.run(Self.job("later-2", sendAt: #""2026-11-27T09:01:00Z""#)) == .acknowledge)
        #expect(harness.sender.sent.isEmpty)
        let summaries = try harness.publisher.summaries(to: Self.results)
        #expect(summaries.map(\.scheduledFor) == ["2026-11-27T09:00:30Z", "2026-11-27T09:01:00Z"])
        #expect(summaries.allSatisfy { $0.devices == 0 && $0.outcomes.isEmpty && $0.error == nil })
        // Now is 09:00:00: nothing is due until 09:00:30, the second at 09:01.
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 0)
        harness.advance(30_000)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 1)
        harness.advance(29_999)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 0)
        harness.advance(1)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 1)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 0, "released once")
        let released = harness.publisher.messages(to: WorkerSettings().queues.dueJobs)
        #expect(released.map(\.properties.messageID) == ["later", "later-2"])
        #expect(released.allSatisfy { $0.properties.headers?[WireHeader.released] != nil && $0.properties.persistent == true })
        #expect(await harness.runReleased() == [.acknowledge, .acknowledge])
        #expect(harness.sender.sent.count == 4, "each job's two devices, once")
        let sent = try harness.publisher.summaries(to: Self.results).dropFirst(2)
        #expect(sent.map(\.jobID) == ["later", "later-2"] && sent.allSatisfy { $0.outcomes == [.delivered: 2] && $0.scheduledFor == nil })
    }

    @Test("a send_at in the past, or now, is sent at once; Unix seconds are taken too")
    func pastIsNow() async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("past", sendAt: #""2026-11-27T08:00:00Z""#)) == .acknowledge)
        #expect(await harness.run(Self.job("now", sendAt: "\(Self.start / 1000)")) == .acknowledge)
        #expect(harness.sender.sent.count == 4)
        #expect(try await harness.schedule.scheduled(app: nil, state: nil, limit: 10).isEmpty)
    }

    @Test("bad send_at values and one past the horizon are refused naming the field; nothing is held or sent", arguments: [
        (#""tomorrow at nine""#, "RFC 3339"), (#""2026-13-01T00:00:00Z""#, "RFC 3339"), ("true", "RFC 3339 time"), ("-5", "whole seconds"),
        (#""2026-12-28T09:00:00Z""#, "more than 30 days ahead"),
    ])
    func refused(_ sendAt: String, _ words: String) async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("bad", sendAt: sendAt)) == .acknowledge)
        let letter = try #require(harness.publisher.messages.first { $0.exchange == "push.dlx" })
        #expect(letter.properties.headers?[WireHeader.errorField] == "send_at")
        let message = letter.properties.headers?[WireHeader.errorMessage]?.stringValue ?? ""
        #expect(message.contains(words), "\(message)")
        #expect(harness.sender.sent.isEmpty)
        #expect(try await harness.schedule.scheduled(app: nil, state: nil, limit: 10).isEmpty)
    }

    @Test("a held job cancelled before its time is never released; a second cancel is answered that it ended; an unknown job is said so")
    func cancelled() async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("promo", sendAt: #""2026-11-27T12:00:00Z""#, extra: #", "idempotency_key": "sale-3""#)) == .acknowledge)
        let scheduler = harness.releaser.scheduler
        let answer = try await scheduler.cancel(HeldJobName(.idempotencyKey("sale-3")))
        let cancelled = try #require(answer["cancelled"] as? [String: Any])
        #expect(cancelled["job_id"] as? String == "promo" && cancelled["state"] as? String == "cancelled")
        await #expect(throws: StoreError(.jobEnded, field: "job", "job 'promo' was cancelled at 2026-11-27T09:00:00Z: only a job still waiting for its send_at can be cancelled")) {
            try await scheduler.cancel(HeldJobName(.job("promo")))
        }
        do {
            _ = try await scheduler.cancel(HeldJobName(.job("nope")))
            Issue.record("an unknown job is refused")
        } catch {
            #expect(error.code == .unknownJob && error.field == "job")
        }
        harness.advance(4 * 3_600_000)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 0)
        #expect(harness.sender.sent.isEmpty)
    }

    @Test("a job released twice (its releaser died before marking it) sends each device once: the second copy asks the ledger")
    func releasedTwice() async throws {
        let harness = try Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("twice", sendAt: #""2026-11-27T09:00:30Z""#)) == .acknowledge)
        harness.advance(30_000)
        // A releaser takes the job, publishes it (a worker sends it), and dies before marking it released.
        let now = SchedulePipelineTests.start + 30_000
        let taken = try #require(try await harness.schedule.due(now: now, leaseUntil: now + 1_000, limit: 10).first)
        let first = AMQPProperties(headers: [WireHeader.released: .int64(now)], messageID: taken.jobID)
        #expect(await harness.pipeline.run(JobDelivery(body: Array(taken.body.utf8), properties: first)) == .acknowledge)
        #expect(harness.sender.sent.count == 2)
        // Past the lease another releaser takes it again.
        harness.advance(2_000)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 1)
        let copy = try #require(harness.publisher.messages(to: WorkerSettings().queues.dueJobs).first)
        #expect(copy.properties.headers?[WireHeader.mayRepeat] != nil, "a second release may repeat the first")
        #expect(await harness.runReleased() == [.acknowledge])
        #expect(harness.sender.sent.count == 2, "the ledger holds both devices: nothing sent again")
    }

    @Test("a job sending in chunks, cancelled: its chunks not yet sent send nothing and their devices get outcome cancelled; a chunk sent before stays sent; a second cancel says it was cancelled")
    func cancelSending() async throws {
        let harness = try Harness(chunkSize: 2)
        let tokens = (1...6).map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        let job = #"{"id": "flash", "idempotency_key": "flash-sale", "results": "all", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {"alert": "50% off"}}}"#
        #expect(await harness.run(job) == .acknowledge)
        let chunks = harness.publisher.messages(to: WorkerSettings().queues.bulkJobs(app: "demo"))
            .sorted { ($0.properties.messageID ?? "") < ($1.properties.messageID ?? "") }
        #expect(chunks.count == 3)
        #expect(await harness.bulk.run(JobDelivery(body: chunks[0].body, properties: chunks[0].properties)) == .acknowledge)
        #expect(harness.sender.sent.count == 2)

        let answer = try await harness.releaser.scheduler.cancel(HeldJobName(.idempotencyKey("flash-sale")))
        let run = try #require(answer["cancelled"] as? [String: Any])
        #expect(run["job_id"] as? String == "flash" && run["state"] as? String == "cancelled" && run["devices"] as? Int == 6 && run["devices_finished"] as? Int == 2, "\(run)")
        // A worker's chunks ask the store again after at most CancellationWatch.freshness (50 ms).
        try await Task.sleep(for: .milliseconds(60))
        for chunk in chunks.dropFirst() {
            #expect(await harness.bulk.run(JobDelivery(body: chunk.body, properties: chunk.properties)) == .acknowledge)
        }
        #expect(harness.sender.sent.count == 2, "nothing sent after the cancel")
        let results = try harness.publisher.results(to: Self.results)
        #expect(results.filter { $0.outcome == .cancelled }.map(\.token).sorted() == (3...6).map(Self.token))
        #expect(results.filter { $0.outcome == .delivered }.count == 2)
        let summaries = try harness.publisher.summaries(to: Self.results).filter { $0.chunk != nil }
        #expect(summaries.map { $0.outcomes }.sorted { ($0[.delivered] ?? 0) > ($1[.delivered] ?? 0) } == [[.delivered: 2], [.cancelled: 2], [.cancelled: 2]])
        await #expect(throws: StoreError.self) { try await harness.releaser.scheduler.cancel(HeldJobName(.job("flash"))) }
    }

    @Test("without a schedule a job with a send_at ahead is refused, not sent early")
    func noSchedule() async throws {
        TestLog.bootstrap()
        let sender = ScriptedSender()
        let publisher = RecordingPublisher(queues: [Self.results])
        let apps = [JobPipeline.App(name: "demo", topic: "com.example.app", sender: sender)]
        let pipeline = JobPipeline(settings: WorkerSettings(), apps: apps, publisher: publisher, logger: Logger(label: "test.schedule"))
        let ahead = JobScheduler.rfc3339(Int64(Date().timeIntervalSince1970 + 3600) * 1000)
        #expect(await pipeline.run(JobDelivery(body: Array(Self.job("x", sendAt: "\"\(ahead)\"").utf8), properties: AMQPProperties(messageID: "m"))) == .acknowledge)
        #expect(sender.sent.isEmpty)
        let letter = try #require(publisher.messages.first { $0.exchange == "push.dlx" })
        #expect(letter.properties.headers?[WireHeader.errorField] == "send_at")
        #expect(letter.properties.headers?[WireHeader.errorMessage]?.stringValue?.contains("ledger: off") == true)
    }
}
