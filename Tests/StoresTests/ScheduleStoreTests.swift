import Foundation
import Logging
import PostgresStores
import SQLiteStores
import Stores
import TestSupport
import Testing

/// The schedule's conformance suite: every store holds, releases, shares out and cancels alike.
@Suite("Job schedule stores")
struct ScheduleStoreTests {
    enum Kind: String, CaseIterable, Sendable, CustomStringConvertible {
        case sqlite, postgres
        var description: String { rawValue }

        /// Two handles on one store, as two workers have, and the ledger in it.
        func make() async throws -> (any ScheduleStore, any ScheduleStore, any LedgerStore) {
            switch self {
            case .sqlite:
                let path = FileManager.default.temporaryDirectory.appendingPathComponent("schedule-\(UUID().uuidString.prefix(8)).db").path
                let ledger = try SQLiteLedgerStore(path: path)
                return (try SQLiteScheduleStore(ledger: ledger), try SQLiteScheduleStore(ledger: ledger), ledger)
            case .postgres:
                let url = try await TestPostgres.freshDatabase()
                let first = try await PostgresRegistryStore(url: url, logger: Logger(label: "test.schedule"))
                try await first.ledger.prepareLedger(rebuildingIndexes: true)
                return (first.schedule, try await PostgresRegistryStore(url: url, logger: Logger(label: "test.schedule")).schedule, first.ledger)
            }
        }
    }

    static let now: Int64 = 1_795_000_000_000

    static func job(_ id: String, at: Int64, app: String = "demo", key: String? = nil) -> HeldJob {
        HeldJob(jobID: id, app: app, idempotencyKey: key, releaseAt: at, body: #"{"id":"\#(id)","send_at":"…"}"#, replyTo: "replies", heldAt: now)
    }

    @Test("held jobs come out at their time, earliest first, once: a second worker asking at once gets none of them", arguments: Kind.allCases)
    func release(_ kind: Kind) async throws {
        let (store, other, _) = try await kind.make()
        try await store.hold(Self.job("later", at: Self.now + 5_000))
        try await store.hold(Self.job("soon", at: Self.now + 1_000))
        try await store.hold(Self.job("soon", at: Self.now + 9_000))  // delivered twice: kept as first held
        #expect(try await store.due(now: Self.now, leaseUntil: Self.now + 60_000, limit: 10).isEmpty)
        let due = try await store.due(now: Self.now + 5_000, leaseUntil: Self.now + 65_000, limit: 10)
        #expect(due.map(\.jobID) == ["soon", "later"])
        #expect(due.first?.body == #"{"id":"soon","send_at":"…"}"# && due.first?.replyTo == "replies" && due.first?.releases == 1)
        #expect(try await other.due(now: Self.now + 5_000, leaseUntil: Self.now + 65_000, limit: 10).isEmpty, "leased to the first worker")
        try await store.released(due, at: Self.now + 5_001)
        #expect(try await other.due(now: Self.now + 100_000, leaseUntil: Self.now + 160_000, limit: 10).isEmpty, "released: never again")
        let shown = try await other.scheduledJob(HeldJobName(.job("soon")))
        #expect(shown?.state == .released && shown?.endedAt == Self.now + 5_001)
    }

    @Test("holds that come at once are each kept as they came: the body's quotes, escapes and text, fields set or not", arguments: Kind.allCases)
    func holdsAtOnce(_ kind: Kind) async throws {
        let (store, _, _) = try await kind.make()
        let jobs = (0..<60).map { (index: Int) -> HeldJob in
            let id = "many-\(index)"
            let body: String = #"{"id":""# + id + #"","payload":{"aps":{"alert":"a \"quote\", a \\ and\n a line, é, 🚀"}}}"#
            let key: String? = index % 3 == 0 ? "key-\(index)" : nil
            let replyTo: String? = index % 2 == 0 ? "replies" : nil
            let chunk: String? = index % 5 == 0 ? "deferred" : nil
            let at: Int64 = Self.now + Int64(index)
            return HeldJob(
                jobID: id, app: index % 4 == 0 ? "other" : "demo", idempotencyKey: key, releaseAt: at, body: body, replyTo: replyTo,
                heldAt: Self.now - Int64(index), chunk: chunk)
        }
        try await withTimeout(.seconds(60), "sixty holds at once") {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for job in jobs { group.addTask { try await store.hold(job) } }
                try await group.waitForAll()
            }
        }
        let due = try await store.due(now: Self.now + 100, leaseUntil: Self.now + 60_000, limit: 100)
        #expect(due.count == jobs.count)
        for job in jobs {
            let kept = due.first { $0.jobID == job.jobID && $0.app == job.app }
            #expect(kept.map { HeldJob(
                jobID: $0.jobID, app: $0.app, idempotencyKey: $0.idempotencyKey, releaseAt: $0.releaseAt, body: $0.body, replyTo: $0.replyTo,
                heldAt: $0.heldAt, chunk: $0.chunk) } == job, "\(String(describing: kept))")
        }
    }

    @Test("a worker that dies with jobs taken leaves them to another once the lease ends; limit bounds a take", arguments: Kind.allCases)
    func lease(_ kind: Kind) async throws {
        let (store, other, _) = try await kind.make()
        for index in 0..<5 { try await store.hold(Self.job("j-\(index)", at: Self.now + Int64(index))) }
        let taken = try await store.due(now: Self.now + 10, leaseUntil: Self.now + 1_000, limit: 3)
        #expect(taken.map(\.jobID) == ["j-0", "j-1", "j-2"])
        #expect(try await other.due(now: Self.now + 500, leaseUntil: Self.now + 2_000, limit: 10).map(\.jobID) == ["j-3", "j-4"])
        // The first worker died: past its lease, its jobs are taken again, counted as a second release.
        let again = try await other.due(now: Self.now + 3_000, leaseUntil: Self.now + 4_000, limit: 10)
        #expect(again.map(\.jobID) == ["j-0", "j-1", "j-2", "j-3", "j-4"])
        #expect(again.allSatisfy { $0.releases == 2 })
    }

    @Test("two workers taking due jobs at the same moment share them out: each job goes to one", arguments: Kind.allCases)
    func concurrentTakes(_ kind: Kind) async throws {
        let (store, other, _) = try await kind.make()
        for index in 0..<200 { try await store.hold(Self.job("c-\(index)", at: Self.now)) }
        async let first = Self.drain(store)
        async let second = Self.drain(other)
        let (a, b) = try await (first, second)
        #expect(a.count + b.count == 200)
        #expect(Set(a).isDisjoint(with: Set(b)))
    }

    static func drain(_ store: any ScheduleStore) async throws -> [String] {
        var taken: [String] = []
        while true {
            let jobs = try await store.due(now: now, leaseUntil: now + 60_000, limit: 7)
            if jobs.isEmpty { return taken }
            taken += jobs.map(\.jobID)
            try await store.released(jobs, at: now)
        }
    }

    @Test("cancel by id or idempotency key stops a waiting job; a released, cancelled or unknown one is said so; an id two apps share needs the app", arguments: Kind.allCases)
    func cancel(_ kind: Kind) async throws {
        let (store, _, _) = try await kind.make()
        try await store.hold(Self.job("a", at: Self.now + 1_000, key: "promo-7"))
        try await store.hold(Self.job("b", at: Self.now + 1_000))
        try await store.hold(Self.job("shared", at: Self.now + 1_000, app: "one"))
        try await store.hold(Self.job("shared", at: Self.now + 1_000, app: "two"))
        guard case .cancelled(let cancelled) = try await store.cancel(HeldJobName(.idempotencyKey("promo-7")), at: Self.now + 10) else {
            Issue.record("the key's job is cancelled")
            return
        }
        #expect(cancelled.jobID == "a" && cancelled.state == .cancelled && cancelled.endedAt == Self.now + 10)
        guard case .ended(let ended) = try await store.cancel(HeldJobName(.job("a")), at: Self.now + 20) else {
            Issue.record("cancelled already")
            return
        }
        #expect(ended.state == .cancelled && ended.endedAt == Self.now + 10)
        #expect(try await store.cancel(HeldJobName(.job("nope")), at: Self.now) == .unknown)
        #expect(try await store.cancel(HeldJobName(.job("b"), app: "other"), at: Self.now) == .unknown)
        await #expect(throws: StoreError.self) { try await store.cancel(HeldJobName(.job("shared")), at: Self.now) }
        guard case .cancelled = try await store.cancel(HeldJobName(.job("shared"), app: "two"), at: Self.now) else {
            Issue.record("the app names one")
            return
        }
        let due = try await store.due(now: Self.now + 5_000, leaseUntil: Self.now + 65_000, limit: 10)
        #expect(due.map { "\($0.app)/\($0.jobID)" } == ["demo/b", "one/shared"], "cancelled jobs are never released")
        try await store.released(due, at: Self.now + 5_000)
        guard case .ended(let released) = try await store.cancel(HeldJobName(.job("b")), at: Self.now + 6_000) else {
            Issue.record("released already")
            return
        }
        #expect(released.state == .released)
        #expect(try await store.scheduled(app: nil, state: .cancelled, limit: 10).map(\.jobID) == ["a", "shared"])
        #expect(try await store.scheduled(app: "one", state: nil, limit: 10).map(\.jobID) == ["shared"])
        #expect(try await store.expireSchedule(before: Self.now + 4_000) == 2, "the cancels before the cut-off go; the later releases stay")
        #expect(try await store.scheduled(app: nil, state: nil, limit: 10).map { "\($0.app)/\($0.jobID)" } == ["demo/b", "one/shared"])
    }

    @Test("a job sending in chunks: cancelled by id or key while devices lack their result; then its chunks see it; a finished or cancelled run says so", arguments: Kind.allCases)
    func running(_ kind: Kind) async throws {
        let (store, other, ledger) = try await kind.make()
        try await store.started(JobRun(jobID: "big", app: "demo", idempotencyKey: "k-big", devices: 3, chunks: 2, startedAt: Self.now))
        try await store.started(JobRun(jobID: "big", app: "demo", devices: 99, chunks: 99, startedAt: Self.now + 1))  // split again: kept as first
        try await store.started(JobRun(jobID: "done", app: "demo", devices: 1, chunks: 1, startedAt: Self.now))
        #expect(try await other.isCancelled(job: "big", app: "demo") == false)
        guard case .stopped(let run) = try await store.cancel(HeldJobName(.idempotencyKey("k-big")), at: Self.now + 5) else {
            Issue.record("a run sending is stopped")
            return
        }
        #expect(run.jobID == "big" && run.devices == 3 && run.chunks == 2 && run.cancelledAt == Self.now + 5 && run.finished == 0)
        #expect(try await other.isCancelled(job: "big", app: "demo"))
        #expect(try await other.isCancelled(job: "big", app: "elsewhere") == false)
        guard case .finished(let again) = try await other.cancel(HeldJobName(.job("big")), at: Self.now + 9) else {
            Issue.record("cancelled before")
            return
        }
        #expect(again.cancelledAt == Self.now + 5)
        // Every device of "done" has its record: finished, not cancellable.
        try await ledger.write([DeliveryRecord(jobID: "done", app: "demo", token: "ab", outcome: "delivered", attempts: 1, at: Self.now)])
        guard case .finished(let finished) = try await store.cancel(HeldJobName(.job("done")), at: Self.now + 9) else {
            Issue.record("finished")
            return
        }
        #expect(finished.finished == 1 && finished.cancelledAt == nil)
        #expect(try await store.isCancelled(job: "done", app: "demo") == false)
    }

    @Test("a frequency cap counts each job once per user within its window; over it, the user is said and not counted; workers counting at once keep to it", arguments: Kind.allCases)
    func caps(_ kind: Kind) async throws {
        let (store, other, _) = try await kind.make()
        let day: Int64 = 86_400_000
        func take(_ job: String, _ users: [String], at: Int64 = Self.now, on schedule: (any ScheduleStore)? = nil) async throws -> Set<String> {
            try await (schedule ?? store).takeCap("promo", app: "demo", users: users, job: job, max: 2, since: at - day, now: at)
        }
        #expect(try await take("p1", ["ada", "bob"]) == [])
        #expect(try await take("p2", ["ada"], at: Self.now + 1) == [])
        #expect(try await take("p3", ["ada", "bob", "bob"], at: Self.now + 2) == ["ada"], "ada had two; bob one")
        #expect(try await take("p2", ["ada"], at: Self.now + 3) == [], "p2 again (a chunk redelivered): counted already")
        #expect(try await store.takeCap("other", app: "demo", users: ["ada"], job: "p4", max: 2, since: Self.now - day, now: Self.now + 4) == [],
            "another cap counts apart")
        #expect(try await take("p5", ["ada"], at: Self.now + day + 1) == [], "the first job left the window")
        // Two workers counting one user at the same moment, ten jobs each: two are let through in all.
        async let first = (0..<10).asyncMap { try await take("a\($0)", ["cy"], at: Self.now + 10, on: store) }
        async let second = (0..<10).asyncMap { try await take("b\($0)", ["cy"], at: Self.now + 10, on: other) }
        let taken = try await (first + second).filter { $0.isEmpty }.count
        #expect(taken == 2)
    }
}

extension Sequence where Element: Sendable {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
