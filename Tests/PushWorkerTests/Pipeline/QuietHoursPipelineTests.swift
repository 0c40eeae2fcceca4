import AMQP
import APNs
import Foundation
import Logging
import PushWorker
import SQLiteStores
import Stores
import TestSupport
import Testing

/// The pipeline with a registry that keeps quiet hours, a schedule and a clock the test moves: a
/// device whose user is in their quiet hours is deferred to the window's end (held as a part of
/// the job), dropped (`filtered`, reason `quiet_hours`) or sent all the same, as the job says.
@Suite("The job pipeline and quiet hours")
struct QuietHoursPipelineTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0x9E17) }
    static let results = "push.results"

    /// 2026-11-27 23:00 in Berlin.
    static let lateEvening = QuietHoursTestsTime.berlin(23, 0)

    struct Harness {
        let sender = ScriptedSender()
        let publisher = RecordingPublisher(queues: [QuietHoursPipelineTests.results])
        let registry: SQLiteRegistryStore
        let nowLane: JobPipeline
        let bulk: JobPipeline
        let releaser: ScheduleReleaser
        let advance: @Sendable (Int64) -> Void
        let writing: Task<Void, Error>

        init(appDefault: PushJob.QuietHoursMode = .defer, caps: [FrequencyCap] = []) async throws {
            TestLog.bootstrap()
            let directory = FileManager.default.temporaryDirectory
            registry = try SQLiteRegistryStore(path: directory.appendingPathComponent("quiet-\(UUID().uuidString.prefix(8)).db").path)
            let ledger = try SQLiteLedgerStore(path: directory.appendingPathComponent("quiet-ledger-\(UUID().uuidString.prefix(8)).db").path)
            let (clock, advance) = WallClock.manual(QuietHoursPipelineTests.lateEvening)
            self.advance = advance
            let scheduler = JobScheduler(store: try SQLiteScheduleStore(ledger: ledger), clock: clock)
            let logger = Logger(label: "test.quiet")
            let writer = LedgerWriter(ledger: ledger, retentionDays: 30, logger: logger)
            writing = Task { try await writer.run() }
            let sender = self.sender, publisher = self.publisher
            let apps = [JobPipeline.App(
                name: "demo", topic: "com.example.app", sender: sender, admission: DeviceAdmission(maxInFlight: 8),
                timeZone: TimeZone(identifier: "Europe/Berlin")!, quietHours: appDefault, caps: caps)]
            let resolver = RegistryResolver(store: registry, logger: logger)
            let registry = registry
            let pipeline = { (lane: Lane) in
                JobPipeline(
                    settings: WorkerSettings(), lane: lane, apps: apps, publisher: publisher, resolver: resolver, ledger: writer, scheduler: scheduler,
                    stages: JobStages.assemble(
                        apps: apps, ledger: writer, scheduler: scheduler, registry: registry, resolver: resolver, chunkSize: WorkerSettings().chunkSize,
                        logger: logger),
                    logger: logger)
            }
            nowLane = pipeline(.now)
            bulk = pipeline(.bulk)
            releaser = ScheduleReleaser(
                scheduler: scheduler, queues: WorkerSettings().queues, retentionDays: 30, connect: { throw AMQPError(.connectionFailed, "not here") }, logger: logger)
            // ada: quiet 22:00–07:00 in her zone (Berlin, the app's too); bob none; cy quiet 22:00–07:00 in New York (17:00 there).
            for json in [
                #"{"command": "register_device", "app": "demo", "token": "\#(QuietHoursPipelineTests.token(1))", "user": "ada"}"#,
                #"{"command": "register_device", "app": "demo", "token": "\#(QuietHoursPipelineTests.token(2))", "user": "bob"}"#,
                #"{"command": "register_device", "app": "demo", "token": "\#(QuietHoursPipelineTests.token(3))", "user": "cy"}"#,
                #"{"command": "set_quiet_hours", "user": "ada", "quiet_hours": {"from": "22:00", "to": "07:00"}}"#,
                #"{"command": "set_quiet_hours", "user": "cy", "quiet_hours": {"from": "22:00", "to": "07:00"}}"#,
                #"{"command": "set_time_zone", "user": "cy", "zone": "America/New_York"}"#,
            ] { try await self.registry.apply(try RegistryCommand(json: Array(json.utf8))) }
        }

        func run(_ json: String) async -> JobSettlement {
            await nowLane.run(JobDelivery(body: Array(json.utf8), properties: AMQPProperties(messageID: "m")))
        }
    }

    static func job(_ id: String, quiet: String? = nil) -> String {
        let tokens = (1...3).map { "\"\(token($0))\"" }.joined(separator: ",")
        return #"{"id": "\#(id)", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {"alert": "hi"}}\#(quiet.map { #", "quiet_hours": "\#($0)""# } ?? "")}"#
    }

    @Test("defer: the device in its quiet hours is held until 07:00 in its zone and sent then; the others now; the summary counts it deferred")
    func deferred() async throws {
        let harness = try await Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("evening")) == .acknowledge)
        #expect(Set(harness.sender.sent.map(\.deviceToken)) == [Self.token(2), Self.token(3)], "bob (no quiet hours) and cy (17:00 in New York)")
        let first = try #require(try harness.publisher.summaries(to: Self.results).first)
        #expect(first.devices == 3 && first.deferred == 1 && first.outcomes == [.delivered: 2], "\(first)")
        // 07:00 in Berlin is 8 hours on: nothing before, ada's part then.
        harness.advance(8 * 3_600_000 - 1)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 0)
        harness.advance(1)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 1)
        let part = try #require(harness.publisher.messages(to: WorkerSettings().queues.dueJobs).first)
        #expect(part.properties.headers?[WireHeader.chunk]?.stringValue == JobPipeline.deferredChunk)
        #expect(await harness.bulk.run(JobDelivery(body: part.body, properties: part.properties)) == .acknowledge)
        #expect(harness.sender.sent.map(\.deviceToken).last == Self.token(1) && harness.sender.sent.count == 3)
        let last = try #require(try harness.publisher.summaries(to: Self.results).last)
        #expect(last.jobID == "evening" && last.chunk == "deferred" && last.outcomes == [.delivered: 1] && last.deferred == 0)
    }

    @Test("drop: the device in its quiet hours gets filtered with reason quiet_hours; ignore sends every device; the app's default applies to a job that names none")
    func dropAndIgnore() async throws {
        let harness = try await Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("drop", quiet: "drop")) == .acknowledge)
        #expect(Set(harness.sender.sent.map(\.deviceToken)) == [Self.token(2), Self.token(3)])
        let results = try harness.publisher.results(to: Self.results)
        let dropped = try #require(results.first { $0.token == Self.token(1) })
        #expect(dropped.outcome == .filtered && dropped.reason == "quiet_hours" && dropped.user == "ada")
        #expect(await harness.run(Self.job("otp", quiet: "ignore")) == .acknowledge)
        #expect(harness.sender.sent.count == 5, "ignore: all three")
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 0, "nothing held")

        let dropping = try await Harness(appDefault: .drop)
        defer { dropping.writing.cancel() }
        #expect(await dropping.run(Self.job("default")) == .acknowledge)
        #expect(dropping.sender.sent.count == 2)
        #expect(try dropping.publisher.summaries(to: Self.results).first?.outcomes == [.delivered: 2, .filtered: 1])
    }

    @Test("a frequency cap: the third promo within a day reaches no device of its users (filtered, reason frequency_cap); other types are not counted; a day on, the first left the window")
    func frequencyCap() async throws {
        let harness = try await Harness(caps: [FrequencyCap(types: ["promo", "sale"], max: 2, per: 86_400)])
        defer { harness.writing.cancel() }
        func promo(_ id: String, type: String = "promo") -> String {
            #"{"id": "\#(id)", "type": "\#(type)", "quiet_hours": "ignore", "audience": {"tokens": ["\#(Self.token(1))", "\#(Self.token(2))", "\#(Self.token(9))"]}, "payload": {"aps": {"alert": "deal"}}}"#
        }
        for id in ["p1", "p2"] { #expect(await harness.run(promo(id, type: id == "p2" ? "sale" : "promo")) == .acknowledge) }
        #expect(harness.sender.sent.count == 6)
        #expect(await harness.run(promo("p3")) == .acknowledge)
        #expect(harness.sender.sent.suffix(1).map(\.deviceToken) == [Self.token(9)], "only the device with no user (never capped)")
        let capped = try harness.publisher.results(to: Self.results).filter { $0.jobID == "p3" && $0.outcome == .filtered }
        #expect(Set(capped.map(\.token)) == [Self.token(1), Self.token(2)] && capped.allSatisfy { $0.reason == "frequency_cap" })
        #expect(await harness.run(promo("n1", type: "news")) == .acknowledge)
        #expect(harness.sender.sent.count == 10, "news is not capped")
        harness.advance(86_400_000 + 1)
        #expect(await harness.run(promo("p4")) == .acknowledge)
        #expect(harness.sender.sent.count == 13, "a day on, room again")
    }

    @Test("local_time 09:00: each device placed in its zone (the device's, its user's, else the app's) and held by zone; released at 09:00 there, once each")
    func localTime() async throws {
        let harness = try await Harness()
        defer { harness.writing.cancel() }
        // Device 4 has no user and a zone of its own: New York, with cy.
        for json in [
            #"{"command": "register_device", "app": "demo", "token": "\#(Self.token(4))"}"#,
            #"{"command": "set_time_zone", "app": "demo", "token": "\#(Self.token(4))", "zone": "America/New_York"}"#,
        ] { try await harness.registry.apply(try RegistryCommand(json: Array(json.utf8))) }
        let tokens = [1, 2, 3, 4, 9].map { "\"\(Self.token($0))\"" }.joined(separator: ",")
        let job = #"{"id": "morning", "local_time": "09:00", "audience": {"tokens": [\#(tokens)]}, "payload": {"aps": {"alert": "Good morning"}}}"#
        #expect(await harness.run(job) == .acknowledge)
        #expect(harness.sender.sent.isEmpty)
        let held = try #require(try harness.publisher.summaries(to: Self.results).first)
        // Berlin's 09:00 on the 28th is 08:00Z; New York's is 14:00Z.
        #expect(held.devices == 5 && held.deferred == 5 && held.scheduledFor == "2026-11-28T08:00:00Z" && held.outcomes.isEmpty, "\(held)")
        harness.advance(10 * 3_600_000 - 1)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 0)
        harness.advance(1)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 1)
        for part in harness.publisher.messages(to: WorkerSettings().queues.dueJobs) {
            #expect(part.properties.headers?[WireHeader.chunk]?.stringValue == JobPipeline.localChunk)
            #expect(await harness.bulk.run(JobDelivery(body: part.body, properties: part.properties)) == .acknowledge)
        }
        #expect(Set(harness.sender.sent.map(\.deviceToken)) == [Self.token(1), Self.token(2), Self.token(9)], "Berlin: ada, bob (the app's zone), the unknown token")
        harness.advance(6 * 3_600_000)
        #expect(try await harness.releaser.releaseDue(via: harness.publisher) == 1)
        let newYork = try #require(harness.publisher.messages(to: WorkerSettings().queues.dueJobs).last)
        #expect(await harness.bulk.run(JobDelivery(body: newYork.body, properties: newYork.properties)) == .acknowledge)
        #expect(harness.sender.sent.count == 5 && Set(harness.sender.sent.suffix(2).map(\.deviceToken)) == [Self.token(3), Self.token(4)])
        let parts = try harness.publisher.summaries(to: Self.results).dropFirst()
        #expect(parts.map(\.chunk) == ["local", "local"] && parts.map { $0.outcomes[.delivered] ?? 0 } == [3, 2])
    }

    @Test("local_time refused: malformed, with send_at, to a channel, naming the field", arguments: [
        #""local_time": "9am""#, #""local_time": "25:00""#, #""local_time": "2026-11-28 09:00""#,
        #""local_time": "09:00", "send_at": "2026-11-28T09:00:00Z""#,
    ])
    func localTimeRefused(_ field: String) async throws {
        let harness = try await Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(#"{"id": "x", \#(field), "audience": {"tokens": ["\#(Self.token(1))"]}, "payload": {"aps": {}}}"#) == .acknowledge)
        let letter = try #require(harness.publisher.messages.first { $0.exchange == "push.dlx" })
        #expect(letter.properties.headers?[WireHeader.errorField] == "local_time")
        #expect(harness.sender.sent.isEmpty)
    }

    @Test("a bad quiet_hours on a job is refused naming the field")
    func refused() async throws {
        let harness = try await Harness()
        defer { harness.writing.cancel() }
        #expect(await harness.run(Self.job("bad", quiet: "later")) == .acknowledge)
        let letter = try #require(harness.publisher.messages.first { $0.exchange == "push.dlx" })
        #expect(letter.properties.headers?[WireHeader.errorField] == "quiet_hours")
        #expect(harness.sender.sent.isEmpty)
    }
}

/// Wall-clock instants in Berlin, for the tests above.
enum QuietHoursTestsTime {
    static func berlin(_ hour: Int, _ minute: Int, day: Int = 27) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "Europe/Berlin")!
        return Int64(calendar.date(from: DateComponents(year: 2026, month: 11, day: day, hour: hour, minute: minute))!.timeIntervalSince1970 * 1000)
    }
}
