import AMQP
import Foundation
import Logging
@testable import PushWorker
import SQLiteStores
import Stores
import TestSupport
import Testing

/// Each decision before a send, alone: a stage given a job (and its recipients), a real SQLite
/// ledger and schedule, and a clock the test moves. The pipeline's own tests run them in order.
@Suite("Job stages, one at a time")
struct JobStageTests {
    static let start: Int64 = 1_790_000_000_000  // 2026-09-21T13:46:40Z, a Monday
    static let logger = Logger(label: "test.stages")

    static func staged(_ json: String, chunk: String? = nil, recipients: [Recipient]? = nil) throws -> StagedJob {
        let decoder = JobDecoder(apps: ["demo": "com.example.app"])
        let job = try decoder.decode(Array(json.utf8))
        var headers: [String: AMQPFieldValue] = [:]
        if let chunk { headers[WireHeader.chunk] = .string(chunk) }
        let delivery = JobDelivery(body: Array(json.utf8), properties: AMQPProperties(headers: headers.isEmpty ? nil : headers, messageID: "m"))
        return StagedJob(job: job, delivery: delivery, replyTo: "results", recipients: recipients)
    }

    static func token(_ n: Int) -> String { String(repeating: "0", count: 60) + String(format: "%04d", n) }

    /// A ledger, its writer running, and the schedule in its file.
    struct Store {
        let ledger: SQLiteLedgerStore
        let schedule: SQLiteScheduleStore
        let writer: LedgerWriter
        let writing: Task<Void, Error>
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("stages-\(UUID().uuidString.prefix(8)).db").path

        init() throws {
            ledger = try SQLiteLedgerStore(path: path)
            schedule = try SQLiteScheduleStore(ledger: ledger)
            let writer = LedgerWriter(ledger: ledger, retentionDays: 30, logger: JobStageTests.logger)
            self.writer = writer
            writing = Task { try await writer.run() }
        }

        func close() {
            writing.cancel()
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    @Test("without a ledger: a key, a send_at ahead and a local_time are refused naming the field; a due send_at, a chunk and a plain job go on")
    func storeRequired() async throws {
        let stage = StoreRequiredStage(withoutLedger: true, withoutSchedule: true)
        func verdict(_ json: String, chunk: String? = nil) async throws -> StageVerdict {
            var staged = try Self.staged(json, chunk: chunk)
            return try await stage.decide(&staged)
        }
        let ahead = JobScheduler.rfc3339(Int64(Date().timeIntervalSince1970 + 3600) * 1000)
        let past = JobScheduler.rfc3339(Int64(Date().timeIntervalSince1970 - 60) * 1000)
        let plain = #"{"id": "j", "audience": {"tokens": ["\#(Self.token(1))"]}, "payload": {"aps": {}}"#
        guard case .refuse(let key) = try await verdict(plain + #", "idempotency_key": "k"}"#) else { Issue.record("a key was not refused"); return }
        #expect(key.field == "idempotency_key" && key.message.contains("needs the delivery ledger"))
        guard case .refuse(let sendAt) = try await verdict(plain + #", "send_at": "\#(ahead)"}"#) else { Issue.record("send_at ahead was not refused"); return }
        #expect(sendAt.field == "send_at" && sendAt.message.contains("needs the schedule"))
        guard case .refuse(let local) = try await verdict(plain + #", "local_time": "09:00"}"#) else { Issue.record("local_time was not refused"); return }
        #expect(local.field == "local_time")
        guard case .goOn = try await verdict(plain + #", "send_at": "\#(past)"}"#) else { Issue.record("a due send_at was held"); return }
        guard case .goOn = try await verdict(plain + "}") else { Issue.record("a plain job was stopped"); return }
        let broadcast = #"{"id": "b", "audience": {"channel": "dGVzdC1jaGFubmVsLTAwMQ=="}, "live_activity": {"event": "update", "content_state": {}}}"#
        guard case .goOn = try await verdict(broadcast) else { Issue.record("a broadcast was stopped"); return }
        guard case .goOn = try await verdict(plain + #", "idempotency_key": "k", "local_time": "09:00"}"#, chunk: "local") else {
            Issue.record("a chunk, whose job took the key and was held, was stopped"); return
        }
        // A worker with a ledger but no schedule takes keys elsewhere, and refuses only holds.
        var keyed = try Self.staged(plain + #", "idempotency_key": "k", "send_at": "\#(ahead)"}"#)
        guard case .refuse(let held) = try await StoreRequiredStage(withoutLedger: false, withoutSchedule: true).decide(&keyed) else {
            Issue.record("send_at ahead was not refused"); return
        }
        #expect(held.field == "send_at")
    }

    @Test("idempotency: the first job takes its key and goes on; another job with it ends with a summary naming the first; the first's redelivery goes on")
    func idempotency() async throws {
        let store = try Store()
        defer { store.close() }
        let stage = IdempotencyStage(ledger: store.writer, logger: Self.logger)
        let body = { (id: String) in #"{"id": "\#(id)", "idempotency_key": "order-7", "audience": {"tokens": ["\#(Self.token(1))"]}, "payload": {"aps": {}}}"# }
        var first = try Self.staged(body("a"))
        guard case .goOn = try await stage.decide(&first) else { Issue.record("the first job did not take its key"); return }
        var second = try Self.staged(body("b"))
        guard case .settle(let summary, let settlement, let outcome, _) = try await stage.decide(&second) else { Issue.record("the duplicate went on"); return }
        #expect(summary?.duplicateOf == "a" && summary?.devices == 0)
        #expect(settlement == .acknowledge && outcome == .duplicate)
        let again = JobDelivery(body: Array(body("a").utf8), properties: AMQPProperties(messageID: "m"), redelivered: true)
        var redelivered = StagedJob(job: first.job, delivery: again, replyTo: "results")
        guard case .goOn = try await stage.decide(&redelivered) else { Issue.record("the key's own job, redelivered, was stopped"); return }
    }

    @Test("send_at: held while ahead of the injected clock, with a summary naming the instant; due once the clock passes it")
    func sendAt() async throws {
        let store = try Store()
        defer { store.close() }
        let (clock, advance) = WallClock.manual(Self.start)
        let stage = SendAtStage(scheduler: JobScheduler(store: store.schedule, clock: clock), logger: Self.logger)
        let at = JobScheduler.rfc3339(Self.start + 3_600_000)
        let json = #"{"id": "s", "send_at": "\#(at)", "audience": {"tokens": ["\#(Self.token(1))"]}, "payload": {"aps": {}}}"#
        var staged = try Self.staged(json)
        guard case .settle(let summary, .acknowledge, .scheduled, _) = try await stage.decide(&staged) else { Issue.record("not held"); return }
        #expect(summary?.scheduledFor == at)
        #expect(try await store.schedule.due(now: Self.start + 3_600_001, leaseUntil: Self.start + 3_700_000, limit: 10).map(\.jobID) == ["s"])
        advance(3_600_000)
        var due = try Self.staged(json)
        guard case .goOn = try await stage.decide(&due) else { Issue.record("a due job was held again"); return }
    }

    @Test("frequency cap: two per user per day; the third job's devices of that user are withheld with reason frequency_cap; a day on, the cap is free again")
    func frequencyCap() async throws {
        let store = try Store()
        defer { store.close() }
        let (clock, advance) = WallClock.manual(Self.start)
        let stage = FrequencyCapStage(
            schedule: store.schedule, clock: clock, caps: ["demo": [FrequencyCap(types: ["promo"], max: 2, per: 86_400)]], logger: Self.logger)
        let recipients = [Recipient(token: Self.token(1), user: "ada"), Recipient(token: Self.token(2), user: "bob"), Recipient(token: Self.token(3))]
        func run(_ id: String, type: String = "promo", only: [Recipient]? = nil) async throws -> StagedJob {
            var staged = try Self.staged(#"{"id": "\#(id)", "type": "\#(type)", "audience": {"users": ["ada"]}, "payload": {"aps": {}}}"#, recipients: only ?? recipients)
            guard case .goOn = try await stage.decide(&staged) else { Issue.record("a cap ended the job"); return staged }
            return staged
        }
        _ = try await run("p1")
        _ = try await run("p2", only: [recipients[0]])
        _ = try await run("n1", type: "news")  // not capped, not counted
        let third = try await run("p3")
        #expect(third.recipients?.map(\.token) == [Self.token(2), Self.token(3)])
        #expect(third.withheld.map(\.recipient.token) == [Self.token(1)] && third.withheld.map(\.reason) == [JobProcessor.frequencyCap])
        advance(86_400_000 + 1)
        let later = try await run("p4")
        #expect(later.recipients?.count == 3 && later.withheld.isEmpty)
    }

    @Test("local_time: the job's devices held as parts at the instant the app's zone shows the time after the injected clock, answered with that instant")
    func localTime() async throws {
        let store = try Store()
        defer { store.close() }
        let (clock, _) = WallClock.manual(Self.start)
        let stage = LocalTimeStage(
            scheduler: JobScheduler(store: store.schedule, clock: clock), resolver: ExplicitTokenResolver(), registry: nil,
            zones: ["demo": TimeZone(identifier: "Asia/Tokyo")!], chunkSize: 2, logger: Self.logger)
        let tokens = (1...3).map { #""\#(Self.token($0))""# }.joined(separator: ", ")
        var staged = try Self.staged(#"{"id": "l", "local_time": "09:00", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}}"#)
        guard case .settle(let summary, .acknowledge, .scheduled, _) = try await stage.decide(&staged) else { Issue.record("not held"); return }
        // 13:46:40Z is 22:46:40 in Tokyo: next 09:00 there is 00:00Z the next day.
        let instant: Int64 = 1_790_035_200_000
        #expect(summary?.scheduledFor == JobScheduler.rfc3339(instant) && summary?.deferred == 3)
        let parts = try await store.schedule.due(now: instant + 1, leaseUntil: instant + 60_000, limit: 10)
        #expect(parts.count == 2 && parts.allSatisfy { $0.releaseAt == instant && $0.chunk == JobPipeline.localChunk })
        // A chunk of it, released, is sent: no second hold.
        var chunk = try Self.staged(#"{"id": "l", "local_time": "09:00", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {}}}"#, chunk: "local")
        guard case .goOn = try await stage.decide(&chunk) else { Issue.record("a released part was held again"); return }
    }

    @Test("quiet hours: at 23:00 in Berlin ada (quiet 22–07) is deferred into the schedule until 07:00, or withheld without one; bob goes on; ignore sends all")
    func quietHours() async throws {
        let store = try Store()
        defer { store.close() }
        let registry = try SQLiteRegistryStore(path: store.path + "-registry")
        defer { try? FileManager.default.removeItem(atPath: store.path + "-registry") }
        for json in [
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(1))", "user": "ada"}"#,
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(2))", "user": "bob"}"#,
            #"{"command": "set_quiet_hours", "user": "ada", "quiet_hours": {"from": "22:00", "to": "07:00"}}"#,
        ] { try await registry.apply(try RegistryCommand(json: Array(json.utf8))) }
        let (clock, _) = WallClock.manual(QuietHoursTestsTime.berlin(23, 0))
        func stage(schedule: (any ScheduleStore)?) -> QuietHoursStage {
            QuietHoursStage(
                gate: QuietHoursGate(store: registry), schedule: schedule, clock: clock,
                apps: ["demo": (.defer, TimeZone(identifier: "Europe/Berlin")!)], logger: Self.logger)
        }
        let recipients = [Recipient(token: Self.token(1), user: "ada"), Recipient(token: Self.token(2), user: "bob")]
        let json = { (quiet: String) in #"{"id": "q", "quiet_hours": "\#(quiet)", "audience": {"users": ["ada", "bob"]}, "payload": {"aps": {}}}"# }

        var deferred = try Self.staged(json("defer"), recipients: recipients)
        guard case .goOn = try await stage(schedule: store.schedule).decide(&deferred) else { Issue.record("quiet hours ended the job"); return }
        #expect(deferred.recipients?.map(\.token) == [Self.token(2)] && deferred.deferred == 1 && deferred.withheld.isEmpty)
        let morning = QuietHoursTestsTime.berlin(23, 0) + 8 * 3_600_000
        let held = try await store.schedule.due(now: morning, leaseUntil: morning + 60_000, limit: 10)
        #expect(held.count == 1 && held.first?.chunk == JobPipeline.deferredChunk && held.first?.releaseAt == morning)

        var unscheduled = try Self.staged(json("defer"), recipients: recipients)
        _ = try await stage(schedule: nil).decide(&unscheduled)
        #expect(unscheduled.recipients?.map(\.token) == [Self.token(2)] && unscheduled.deferred == 0)
        #expect(unscheduled.withheld.map(\.recipient.token) == [Self.token(1)] && unscheduled.withheld.map(\.reason) == [JobProcessor.quietHours])

        var ignored = try Self.staged(json("ignore"), recipients: recipients)
        _ = try await stage(schedule: store.schedule).decide(&ignored)
        #expect(ignored.recipients?.count == 2 && ignored.withheld.isEmpty && ignored.deferred == 0)
    }
}
