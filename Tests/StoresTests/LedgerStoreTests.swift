import CSQLite
import Foundation
import Logging
import PostgresStores
@testable import SQLiteStores
@testable import Stores
import Synchronization
import TestSupport
import Testing

/// The ledger's conformance suite: every store keeps, finds and expires records alike.
@Suite("Delivery ledger stores")
struct LedgerStoreTests {
    enum Kind: String, CaseIterable, Sendable, CustomStringConvertible {
        case sqlite, postgres
        var description: String { rawValue }

        func make() async throws -> any LedgerStore {
            switch self {
            case .sqlite:
                return try SQLiteLedgerStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("ledger-\(UUID().uuidString.prefix(8)).db").path)
            case .postgres:
                let ledger = try await PostgresRegistryStore(url: try await TestPostgres.freshDatabase(), logger: Logger(label: "test.ledger")).ledger
                try await ledger.prepareLedger(rebuildingIndexes: true)
                return ledger
            }
        }
    }

    static let now: Int64 = 1_795_000_000_000
    static let day: Int64 = 86_400_000

    static func record(_ job: String, _ index: Int, user: String? = nil, outcome: String = "delivered", at: Int64 = now) -> DeliveryRecord {
        DeliveryRecord(
            jobID: job, chunk: "1/2", app: "demo", token: TestDeviceTokens.hex(index, series: 0x1ED6), user: user, outcome: outcome,
            status: outcome == "delivered" ? 200 : 410, reason: outcome == "delivered" ? nil : "Unregistered", apnsID: "apns-\(index)", attempts: 1, at: at)
    }

    @Test("a device's first final result is kept: written again, it stays as first written; finals finds a job's devices by token", arguments: Kind.allCases)
    func finals(_ kind: Kind) async throws {
        let ledger = try await kind.make()
        try await ledger.write([Self.record("j-1", 1, user: "u-1"), Self.record("j-1", 2, outcome: "rejected"), Self.record("j-2", 1)])
        try await ledger.write([Self.record("j-1", 1, outcome: "failed")])
        let tokens = [1, 2, 3].map { TestDeviceTokens.hex($0, series: 0x1ED6) }
        let found = try await ledger.finals(job: "j-1", app: "demo", tokens: tokens)
        #expect(Set(found.keys) == Set(tokens.prefix(2)))
        #expect(found[tokens[0]] == Self.record("j-1", 1, user: "u-1"), "every field back as written, the first outcome kept")
        #expect(found[tokens[1]]?.reason == "Unregistered" && found[tokens[1]]?.status == 410)
        #expect(try await ledger.finals(job: "j-1", app: "other", tokens: tokens).isEmpty, "another app's job of the same id is another job")
        #expect(try await ledger.finals(job: "j-1", app: "demo", tokens: []).isEmpty)
        // A broadcast: the empty token, its channel and request id.
        var broadcast = DeliveryRecord(jobID: "b-1", app: "demo", token: "", outcome: "delivered", status: 200, attempts: 1, at: Self.now, channel: "Y2g=", requestID: "r-1")
        broadcast.chunk = nil
        try await ledger.write([broadcast])
        #expect(try await ledger.finals(job: "b-1", app: "demo", tokens: [""])[""] == broadcast)
        // An Android device: its platform and FCM's message name come back, with no apns_id.
        let android = "dGVzdC1kZXZpY2U:APA91bH" + String(repeating: "k7-_Qw", count: 22)
        let fcm = DeliveryRecord(
            jobID: "a-1", app: "demo", token: android, user: "u-1", outcome: "delivered", status: 200, attempts: 1, at: Self.now,
            fcmName: "projects/demo/messages/0:1795000000000000%abc")
        try await ledger.write([fcm])
        let back = try #require(try await ledger.finals(job: "a-1", app: "demo", tokens: [android])[android])
        #expect(back == fcm && back.platform == .fcm && back.apnsID == nil)
        #expect(try await ledger.deliveries(DeliveryQuery(.token(android))) == [fcm])
        #expect(found[tokens[0]]?.platform == .apns && found[tokens[0]]?.fcmName == nil)
    }

    @Test("text with tabs, newlines, backslashes, \\N and non-ASCII comes back as written; a batch with a record held already keeps the others", arguments: Kind.allCases)
    func awkwardText(_ kind: Kind) async throws {
        let ledger = try await kind.make()
        var odd = Self.record("j\t1\\N", 1, user: "u\n1 \\ ü", outcome: "rejected")
        odd.reason = "Bad\r\nReason\t\\N"
        odd.chunk = nil
        try await ledger.write([Self.record("j-3", 1)])
        try await ledger.write([Self.record("j-3", 1, outcome: "failed"), Self.record("j-3", 2), odd])
        let token = TestDeviceTokens.hex(1, series: 0x1ED6)
        #expect(try await ledger.finals(job: "j\t1\\N", app: "demo", tokens: [token])[token] == odd)
        let kept = try await ledger.finals(job: "j-3", app: "demo", tokens: [1, 2].map { TestDeviceTokens.hex($0, series: 0x1ED6) })
        #expect(kept.count == 2)
        #expect(kept[token]?.outcome == "delivered", "the first result stays")
        #expect(try await ledger.deliveries(DeliveryQuery(.user("u\n1 \\ ü"))).map(\.jobID) == ["j\t1\\N"])

        // The same way round (a chunk done again after a crash), records waiting in a results
        // message, an Android device's among them: every field back as written.
        var waiting = Self.record("j-4", 3)
        waiting.resultsMessage = 7
        let android = "dGVzdC1kZXZpY2U:APA91bH" + String(repeating: "k7-_Qw", count: 22)
        let phone = DeliveryRecord(
            jobID: "j-4", app: "demo", token: android, outcome: "delivered", status: 200, attempts: 1, at: Self.now, resultsMessage: 7,
            fcmName: "projects/demo/messages/0:1")
        try await ledger.write([Self.record("j-4", 1)])
        try await ledger.write([Self.record("j-4", 1, outcome: "failed"), waiting, phone])
        let again = try await ledger.finals(job: "j-4", app: "demo", tokens: [TestDeviceTokens.hex(3, series: 0x1ED6), android])
        #expect(again[TestDeviceTokens.hex(3, series: 0x1ED6)] == waiting && again[android] == phone, "\(again)")
    }

    @Test("by job, user or token: newest first, within since and until, at most limit", arguments: Kind.allCases)
    func queries(_ kind: Kind) async throws {
        let ledger = try await kind.make()
        try await ledger.write((0..<5).map { Self.record("j-\($0)", 7, user: "u-7", at: Self.now + Int64($0) * 1000) })
        try await ledger.write([Self.record("j-0", 8, user: "u-8")])
        let byUser = try await ledger.deliveries(DeliveryQuery(.user("u-7")))
        #expect(byUser.map(\.jobID) == ["j-4", "j-3", "j-2", "j-1", "j-0"])
        let window = try await ledger.deliveries(DeliveryQuery(.token(TestDeviceTokens.hex(7, series: 0x1ED6)), since: Self.now + 1000, until: Self.now + 3000))
        #expect(window.map(\.jobID) == ["j-3", "j-2", "j-1"])
        #expect(try await ledger.deliveries(DeliveryQuery(.user("u-7"), limit: 2)).map(\.jobID) == ["j-4", "j-3"])
        #expect(Set(try await ledger.deliveries(DeliveryQuery(.job("j-0"))).map(\.user)) == ["u-7", "u-8"])
        #expect(try await ledger.deliveries(DeliveryQuery(.user("nobody"))).isEmpty)
    }

    @Test("retention drops the days before the cut-off and keeps the rest", arguments: Kind.allCases)
    func retention(_ kind: Kind) async throws {
        let ledger = try await kind.make()
        let old = (0..<30).map { Self.record("old", $0, at: Self.now - 40 * Self.day) }
        let older = (0..<5).map { Self.record("older", $0, at: Self.now - 41 * Self.day) }
        try await ledger.write(old + older)
        try await ledger.write([Self.record("new", 1)])
        #expect(try await ledger.expire(before: Self.now - 30 * Self.day) == 35)
        #expect(try await ledger.deliveries(DeliveryQuery(.job("old"))).isEmpty)
        #expect(try await ledger.deliveries(DeliveryQuery(.job("new"))).count == 1)
        #expect(try await ledger.expire(before: Self.now - 30 * Self.day) == 0)
        // Written again after an expiry: the day comes back.
        try await ledger.write([Self.record("old", 1, at: Self.now - 40 * Self.day)])
        #expect(try await ledger.deliveries(DeliveryQuery(.job("old"))).count == 1)
    }

    @Test("an idempotency key: taken once; a second job is told the first; a redelivery of the first goes on; a lapsed key is free; workers asking at once take it once", arguments: Kind.allCases)
    func idempotency(_ kind: Kind) async throws {
        let ledger = try await kind.make()
        let hour: Int64 = 3_600_000
        func claim(_ job: String, key: String = "k", again: Bool = false, now: Int64 = LedgerStoreTests.now) async throws -> String? {
            try await ledger.claim(key: key, app: "demo", job: job, again: again, now: now, freeBefore: now - 24 * hour)
        }
        #expect(try await claim("first") == nil)
        #expect(try await claim("second") == "first")
        #expect(try await claim("first", again: true) == nil, "the first job, redelivered")
        #expect(try await claim("first") == "first", "the first job published again by its producer is a duplicate")
        #expect(try await ledger.claim(key: "k", app: "other", job: "third", again: false, now: Self.now, freeBefore: 0) == nil, "keys are per app")
        #expect(try await claim("late", now: Self.now + 25 * hour) == nil, "past the window the key is free")
        #expect(try await claim("later", now: Self.now + 26 * hour) == "late")
        // Ten claims at the same moment: the store decides, one takes it. On PostgreSQL they go
        // over pooled connections, as from many workers; in one process SQLite's claims go
        // through the ledger's one serial queue, so two processes race on one file in
        // IdempotencyRaceTests.
        let holders = try await withThrowingTaskGroup(of: String?.self) { group in
            for index in 0..<10 { group.addTask { try await claim("racer-\(index)", key: "race") } }
            return try await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(holders.count { $0 == nil } == 1, "\(holders)")
        #expect(Set(holders.compactMap { $0 }).count == 1, "the others all name the one that took it")
        // Retention forgets keys with the records.
        _ = try await ledger.expire(before: Self.now + 30 * hour)
        #expect(try await claim("after", now: Self.now + 27 * hour) == nil)
    }

    @Test("results messages: a record names its message until that job's message is marked confirmed; records answered again are settled one by one; a mark goes with its day", arguments: Kind.allCases)
    func confirmedMessages(_ kind: Kind) async throws {
        let ledger = try await kind.make()
        var records = (1...4).map { Self.record("packed", $0) }
        records[0].resultsMessage = 7
        records[1].resultsMessage = 7
        records[2].resultsMessage = 8
        records[2].timestamp = 1_700_000_000_123
        try await ledger.write(records)
        let tokens = records.map(\.token)
        func waiting() async throws -> [String: Int64] {
            try await ledger.finals(job: "packed", app: "demo", tokens: tokens + [Self.record("packed", 5).token]).compactMapValues(\.resultsMessage)
        }
        #expect(try await waiting() == [tokens[0]: 7, tokens[1]: 7, tokens[2]: 8])
        #expect(try await ledger.finals(job: "packed", app: "demo", tokens: [tokens[2]])[tokens[2]]?.timestamp == 1_700_000_000_123)
        try await ledger.confirm(job: "packed", app: "demo", messages: [7], answered: [], at: Self.now)
        #expect(try await waiting() == [tokens[2]: 8])
        // Another job's message of the same number, or the same token answered in another app, is not this one.
        try await ledger.confirm(job: "other", app: "demo", messages: [8], answered: [], at: Self.now)
        try await ledger.confirm(job: "packed", app: "other", messages: [], answered: [tokens[2]], at: Self.now)
        #expect(try await waiting() == [tokens[2]: 8])
        try await ledger.confirm(job: "packed", app: "demo", messages: [7], answered: [tokens[2]], at: Self.now)
        #expect(try await waiting().isEmpty, "marked twice, and answered")
        // A record two days on naming message 7: the mark of `now`'s day goes with that day.
        var later = Self.record("packed", 5, at: Self.now + 2 * Self.day)
        later.resultsMessage = 7
        try await ledger.write([later])
        #expect(try await waiting().isEmpty)
        _ = try await ledger.expire(before: Self.now + Self.day)
        #expect(try await waiting() == [later.token: 7])
    }

    @Test("a PostgreSQL ledger made by 0.4.1 (unique key led by the job, an index on the token) gets this version's indexes at start, its records and their uniqueness kept")
    func postgresOldLayout() async throws {
        let url = try await TestPostgres.freshDatabase()
        let day = DeliveryRecord.day(ofMilliseconds: Self.now)
        let token = TestDeviceTokens.hex(1, series: 0x1ED6)
        // What prepareLedger of 0.4.1 made, and a record written then.
        _ = try await TestPostgres.query([
            """
            CREATE TABLE deliveries(
              job_id TEXT COLLATE "C" NOT NULL, app TEXT COLLATE "C" NOT NULL, token TEXT COLLATE "C" NOT NULL, chunk TEXT,
              user_id TEXT COLLATE "C", outcome TEXT NOT NULL,
              status INTEGER, reason TEXT, apns_id TEXT, apns_unique_id TEXT, attempts INTEGER NOT NULL, at BIGINT NOT NULL,
              day BIGINT NOT NULL, channel TEXT, request_id TEXT,
              UNIQUE (job_id, app, token, day)) PARTITION BY LIST (day)
            """,
            "CREATE INDEX deliveries_user ON deliveries(user_id, at) WHERE user_id IS NOT NULL",
            "CREATE INDEX deliveries_token ON deliveries(token, at)",
            "CREATE TABLE deliveries_\(day) PARTITION OF deliveries FOR VALUES IN (\(day))",
            """
            INSERT INTO deliveries(job_id, app, token, chunk, user_id, outcome, status, apns_id, attempts, at, day)
            VALUES ('j-old', 'demo', '\(token)', '1/2', 'u-1', 'delivered', 200, 'apns-1', 1, \(Self.now), \(day))
            """,
        ], at: url)
        let layout = """
            SELECT string_agg(indexname || ' ' || regexp_replace(indexdef, '^.* USING ', ''), '; ' ORDER BY indexname)
            FROM pg_indexes WHERE tablename = 'deliveries'
            """
        let expected = "deliveries_job btree (job_id, at) INCLUDE (app); deliveries_once btree (token, job_id, app, day); deliveries_user btree (user_id, at) WHERE (user_id IS NOT NULL)"
        let partition = """
            SELECT string_agg(regexp_replace(indexdef, '^.* USING ', ''), '; ' ORDER BY regexp_replace(indexdef, '^.* USING ', ''))
            FROM pg_indexes WHERE tablename = 'deliveries_\(day)'
            """

        let store = try await PostgresRegistryStore(url: url, logger: Logger(label: "test.ledger")).ledger
        let old = try await TestPostgres.query([layout], at: url)
        try await store.prepareLedger(rebuildingIndexes: false)
        #expect(try await TestPostgres.query([layout], at: url) == old, "a command that only reads leaves the layout to a worker")
        try await store.prepareLedger(rebuildingIndexes: true)
        #expect(try await TestPostgres.query([layout], at: url) == [expected])
        #expect(try await TestPostgres.query([partition], at: url) == [
            "btree (job_id, at) INCLUDE (app); btree (token, job_id, app, day); btree (user_id, at) WHERE (user_id IS NOT NULL)",
        ], "the day's partition has the same three")
        try await store.prepareLedger(rebuildingIndexes: true)
        #expect(try await TestPostgres.query([layout], at: url) == [expected], "a second start changes nothing")

        try await store.write([Self.record("j-old", 1, outcome: "failed"), Self.record("j-old", 2)])
        let found = try await store.finals(job: "j-old", app: "demo", tokens: [1, 2].map { TestDeviceTokens.hex($0, series: 0x1ED6) })
        #expect(found[token] == Self.record("j-old", 1, user: "u-1"), "the record written before the upgrade stays as first written")
        #expect(found.count == 2)
        #expect(try await store.deliveries(DeliveryQuery(.job("j-old"))).count == 2)
        try await Self.keepsNewColumns(store)

        // A new ledger has the same layout.
        let fresh = try await TestPostgres.freshDatabase()
        try await PostgresRegistryStore(url: fresh, logger: Logger(label: "test.ledger")).ledger.prepareLedger(rebuildingIndexes: true)
        #expect(try await TestPostgres.query([layout], at: fresh) == [expected])
    }

    @Test("an SQLite ledger: a new file's unique key leads with the token beside (job, time); a file made by 0.4.1 keeps its layout and works alike")
    func sqliteLayouts() async throws {
        func indexes(_ path: String) throws -> [String] {
            let database = try SQLiteDatabase(path: path)
            var found: [String] = []
            try database.prepare("SELECT sql FROM sqlite_master WHERE tbl_name = 'deliveries' AND type = 'index' AND sql IS NOT NULL ORDER BY name").run([]) { row in
                found.append(row.text(0) ?? "")
            }
            var unique: [String] = []
            try database.prepare("SELECT sql FROM sqlite_master WHERE name = 'deliveries'").run([]) { row in unique.append(row.text(0) ?? "") }
            return found + unique.map { String($0[$0.range(of: "UNIQUE")!.lowerBound...]) }
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-layout-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let fresh = directory.appendingPathComponent("new.db").path
        _ = try SQLiteLedgerStore(path: fresh)
        #expect(try indexes(fresh) == [
            "CREATE INDEX deliveries_job ON deliveries(job_id, at, app)",
            "CREATE INDEX deliveries_user ON deliveries(user_id, at) WHERE user_id IS NOT NULL",
            "UNIQUE(token, job_id, app))",
        ])
        // 0.4.1 run on it (a rollback) adds its token index; the next open drops it again.
        try SQLiteDatabase(path: fresh).execute("CREATE INDEX deliveries_token ON deliveries(token, at)")
        _ = try SQLiteLedgerStore(path: fresh)
        let reopened = try indexes(fresh)
        #expect(!reopened.contains { $0.contains("deliveries_token") } && reopened.count == 3, "\(reopened)")

        // What 0.4.1 made, with a record written then.
        let old = directory.appendingPathComponent("old.db").path
        let token = TestDeviceTokens.hex(1, series: 0x1ED6)
        do {
            let database = try SQLiteDatabase(path: old)
            try database.execute("""
                CREATE TABLE deliveries(
                  job_id TEXT NOT NULL, app TEXT NOT NULL, token TEXT NOT NULL, chunk TEXT, user_id TEXT, outcome TEXT NOT NULL,
                  status INTEGER, reason TEXT, apns_id TEXT, apns_unique_id TEXT, attempts INTEGER NOT NULL, at INTEGER NOT NULL,
                  day INTEGER NOT NULL, channel TEXT, request_id TEXT,
                  UNIQUE(job_id, app, token));
                CREATE INDEX deliveries_user ON deliveries(user_id, at) WHERE user_id IS NOT NULL;
                CREATE INDEX deliveries_token ON deliveries(token, at);
                INSERT INTO deliveries(job_id, app, token, chunk, user_id, outcome, status, apns_id, attempts, at, day)
                VALUES ('j-old', 'demo', '\(token)', '1/2', 'u-1', 'delivered', 200, 'apns-1', 1, \(Self.now), \(DeliveryRecord.day(ofMilliseconds: Self.now)));
                """)
        }
        let before = try indexes(old)
        let ledger = try SQLiteLedgerStore(path: old)
        #expect(try indexes(old) == before, "the old layout is kept")
        #expect(before.contains("CREATE INDEX deliveries_token ON deliveries(token, at)"))
        try await ledger.write([Self.record("j-old", 1, outcome: "failed"), Self.record("j-old", 2)])
        let found = try await ledger.finals(job: "j-old", app: "demo", tokens: [1, 2].map { TestDeviceTokens.hex($0, series: 0x1ED6) })
        #expect(found[token] == Self.record("j-old", 1, user: "u-1"), "the record written by 0.4.1 stays as first written")
        #expect(found.count == 2)
        #expect(try await ledger.deliveries(DeliveryQuery(.token(token))).map(\.jobID) == ["j-old"])
        #expect(try await ledger.deliveries(DeliveryQuery(.job("j-old"))).count == 2)
        try await Self.keepsNewColumns(ledger)
    }

    @Test("a new SQLite ledger file has 4 KiB pages, and the schedule in it opens it as it is; the registry's file, where the ledger is kept by default, keeps its 16 KiB")
    func sqlitePageSizes() throws {
        func pageSize(_ path: String) throws -> Int64? {
            var size: Int64?
            try SQLiteDatabase(path: path).prepare("PRAGMA page_size").run([]) { row in size = row.integer(0) }
            return size
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-pages-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let own = directory.appendingPathComponent("ledger.db").path
        let ledger = try SQLiteLedgerStore(path: own)
        _ = try SQLiteScheduleStore(ledger: ledger)
        #expect(try pageSize(own) == Int64(SQLiteLedgerStore.pageSize))
        #expect(SQLiteLedgerStore.pageSize == 4_096)

        // The registry makes its file first; the ledger then opens it as it is.
        let shared = directory.appendingPathComponent("registry.db").path
        _ = try SQLiteRegistryStore(path: shared)
        _ = try SQLiteLedgerStore(path: shared)
        #expect(try pageSize(shared) == 16_384)
    }

    @Test("an SQLite batch that spans two days, its records in any order: one expiry removes every record of the older day, by rowid steps")
    func sqliteBatchAcrossDays() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-days-\(UUID().uuidString.prefix(8)).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let ledger = try SQLiteLedgerStore(path: path)
        // More than two expiry steps, the days alternating: written as given, an expiry step
        // would meet kept rows among the first rowids and stop with old ones left behind.
        let count = Int(SQLiteLedgerStore.expiryStep) * 2 + 2
        let records = (0..<count).map { Self.record("mixed", $0, at: $0.isMultiple(of: 2) ? Self.now : Self.now - 40 * Self.day) }
        try await ledger.write(records)
        #expect(try await ledger.expire(before: Self.now - 30 * Self.day) == count / 2)
        let kept = try await ledger.finals(job: "mixed", app: "demo", tokens: records.map(\.token))
        #expect(kept.count == count / 2 && kept.values.allSatisfy { $0.at == Self.now })
    }

    @Test("an SQLite batch in token order: tokens alike in their first eight bytes, or shorter, are told apart byte by byte; of two results for one device in one batch the first stays")
    func sqliteBatchOrder() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-order-\(UUID().uuidString.prefix(8)).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let ledger = try SQLiteLedgerStore(path: path)
        func record(_ token: String, _ outcome: String) -> DeliveryRecord {
            DeliveryRecord(jobID: "order", app: "demo", token: token, outcome: outcome, attempts: 1, at: Self.now)
        }
        // "e\u{301}x" (65 CC 81 78) comes before "\u{E9}a" (C3 A9 61) as bytes, as SQLite's index
        // has them; Swift's String order puts it after (it compares them as "éx" and "éa").
        let tokens = ["aaaaaaaa2", "aaaaaaaa10", "aaaaaaaa", "aaaa", "", "zz", "\u{E9}a", "e\u{301}x", "aaaaaaaa1"]
        let batch = tokens.map { record($0, "delivered") } + [record("aaaaaaaa1", "failed"), record("aaaa", "failed"), record("", "failed")]
        try await ledger.write(batch)
        let kept = try await ledger.finals(job: "order", app: "demo", tokens: tokens)
        #expect(kept.count == tokens.count)
        #expect(kept.values.allSatisfy { $0.outcome == "delivered" }, "\(kept.values.filter { $0.outcome != "delivered" }.map(\.token))")
        let bytewise = tokens.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        #expect(try await ledger.deliveries(DeliveryQuery(.job("order"))).map(\.token) == bytewise)
        // Written in that order: the rowids rise with the tokens' bytes.
        var written: [String] = []
        try SQLiteDatabase(path: path).prepare("SELECT token FROM deliveries ORDER BY rowid").run([]) { row in written.append(row.text(0) ?? "?") }
        #expect(written == bytewise)
    }

    @Test("SQLite keeps no allocation statistics: they would take a process-wide mutex on every allocation of every connection")
    func sqliteWithoutMemoryStatistics() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-stats-\(UUID().uuidString.prefix(8)).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let ledger = try SQLiteLedgerStore(path: path)
        try await ledger.write((0..<100).map { Self.record("stats", $0) })
        #expect(try await ledger.finals(job: "stats", app: "demo", tokens: [TestDeviceTokens.hex(1, series: 0x1ED6)]).count == 1)
        #expect(sqlite3_memory_used() == 0, "SQLite counted its allocations")
    }

    @Test("by job, user or token, only one app's records or one owner's devices; a page's cursor goes on within since and until", arguments: Kind.allCases)
    func filtersAndWindowedPages(_ kind: Kind) async throws {
        let ledger = try await kind.make()
        try await ledger.write((0..<5).map { Self.record("j-\($0)", 7, user: "u-7", at: Self.now + Int64($0) * 1000) })
        var elsewhere = Self.record("j-0", 7, user: "u-7")
        elsewhere.app = "other"
        try await ledger.write([Self.record("j-0", 8, user: "u-8"), elsewhere])
        let token = TestDeviceTokens.hex(7, series: 0x1ED6)
        #expect(try await ledger.deliveries(DeliveryQuery(.token(token))).count == 6)
        #expect(try await ledger.deliveries(DeliveryQuery(.token(token), app: "other")) == [elsewhere])
        #expect(try await ledger.deliveries(DeliveryQuery(.job("j-0"), owner: "u-8")).map(\.user) == ["u-8"])
        #expect(try await ledger.deliveries(DeliveryQuery(.job("j-0"), app: "demo", owner: "u-7")).map(\.app) == ["demo"])

        // Pages within until: the cursor is older than until, and bounds the window itself.
        let first = try await ledger.page(DeliveryQuery(.user("u-7"), app: "demo", until: Self.now + 3000, limit: 2))
        #expect(first.records.map(\.jobID) == ["j-3", "j-2"])
        let second = try await ledger.page(DeliveryQuery(.user("u-7"), app: "demo", until: Self.now + 3000, limit: 2, after: first.next))
        #expect(second.records.map(\.jobID) == ["j-1", "j-0"] && second.next == nil, "the page that ends the list says so: \(second)")
        // A cursor newer than until (a page read before until was set): until bounds the window.
        let newest = try await ledger.page(DeliveryQuery(.user("u-7"), app: "demo", limit: 1))
        #expect(newest.records.map(\.jobID) == ["j-4"])
        let narrowed = try await ledger.page(DeliveryQuery(.user("u-7"), app: "demo", since: Self.now + 1000, until: Self.now + 2000, after: newest.next))
        #expect(narrowed.records.map(\.jobID) == ["j-2", "j-1"] && narrowed.next == nil)
    }

    @Test("by idempotency key: the records of the job holding the key, in every app or the one named; expireKeys forgets the keys taken before its time, which then find nothing and are free", arguments: Kind.allCases)
    func byIdempotencyKey(_ kind: Kind) async throws {
        let ledger = try await kind.make()
        let hour: Int64 = 3_600_000
        func claim(_ key: String, app: String = "demo", job: String, at: Int64 = LedgerStoreTests.now) async throws -> String? {
            try await ledger.claim(key: key, app: app, job: job, again: false, now: at, freeBefore: at - 24 * hour)
        }
        #expect(try await claim("k-1", job: "j-1") == nil)
        #expect(try await claim("k-1", app: "other", job: "j-9") == nil)
        #expect(try await claim("k-2", job: "j-2", at: Self.now + 2 * hour) == nil)
        var nine = Self.record("j-9", 9, at: Self.now + 10)
        nine.app = "other"
        var sameIDElsewhere = Self.record("j-1", 8, at: Self.now + 20)
        sameIDElsewhere.app = "other"
        try await ledger.write((0..<3).map { Self.record("j-1", $0, at: Self.now + Int64($0)) } + [Self.record("j-2", 5), nine, sameIDElsewhere])

        let found = try await ledger.deliveries(DeliveryQuery(.idempotencyKey("k-1")))
        #expect(found.map { "\($0.app)/\($0.jobID)" } == ["other/j-9", "demo/j-1", "demo/j-1", "demo/j-1"],
            "the key's job in each app, not another app's job of the same id: \(found)")
        #expect(try await ledger.deliveries(DeliveryQuery(.idempotencyKey("k-1"), app: "demo")).map(\.token) == [2, 1, 0].map { TestDeviceTokens.hex($0, series: 0x1ED6) })
        #expect(try await ledger.deliveries(DeliveryQuery(.idempotencyKey("k-3"))).isEmpty)

        #expect(try await ledger.expireKeys(takenBefore: Self.now + hour) == 2)
        #expect(try await ledger.deliveries(DeliveryQuery(.idempotencyKey("k-1"))).isEmpty, "a key forgotten finds no job")
        #expect(try await ledger.deliveries(DeliveryQuery(.idempotencyKey("k-2"))).map(\.jobID) == ["j-2"], "a key within its window stays")
        #expect(try await ledger.expireKeys(takenBefore: Self.now + hour) == 0)
        #expect(try await claim("k-1", job: "j-10", at: Self.now + 3 * hour) == nil, "a forgotten key is free")
        #expect(try await claim("k-2", job: "j-11", at: Self.now + 3 * hour) == "j-2", "the key still held is not")
    }

    @Test("a cursor is URL-safe text that comes back as it went; text that is not one is no cursor")
    func cursorText() throws {
        let record = DeliveryRecord(jobID: "job/ü?&=+", app: "demo", token: "ab+/cd", outcome: "delivered", attempts: 1, at: 1_795_000_000_123)
        let cursor = DeliveryCursor(after: record)
        #expect(cursor.text.utf8.allSatisfy { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }, "\(cursor.text)")
        #expect(DeliveryCursor(cursor.text) == cursor)
        func encoded(_ json: String) -> String {
            Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        #expect(DeliveryCursor(encoded(#"[1795000000123,"ab","j","demo"]"#)) != nil, "the form a cursor has")
        for text in ["", "not a cursor!", cursor.text + "=", encoded("[1,2]"), encoded(#"["a","b","c","d"]"#), encoded(#"[true,"b","c","d"]"#),
                     encoded(#"[1.5,"b","c","d"]"#), encoded(#"{"at":1}"#), String(repeating: "A", count: 5000)] {
            #expect(DeliveryCursor(text) == nil, "\(text.prefix(40))")
        }
    }

    /// What the writer of another job's records has done so far.
    final class Progress: Sendable {
        let state = Mutex<(batches: Int, failure: String?)>((0, nil))
    }

    @Test("a 25,000-device job listed whole a page at a time through the cursor, and a user's records across jobs: none twice, none missing, in order, while another job's records are written", arguments: Kind.allCases)
    func pagingWhileWriting(_ kind: Kind) async throws {
        let ledger = try await kind.make()
        let devices = 25_000
        // Seven records an instant, so pages end inside an instant, where the token, job and app
        // decide; tokens in an order unlike the records' (7919 is prime to 25,000), and the
        // first hundred devices also in another app under the same job id.
        var big = (0..<devices).map { index in
            DeliveryRecord(
                jobID: "big", app: "demo", token: TestDeviceTokens.hex(index * 7919 % devices, series: 0x9A61), user: "u-\(index % 3)", outcome: "delivered",
                status: 200, attempts: 1, at: Self.now + Int64(index / 7))
        }
        big += big.prefix(100).map { record in
            var elsewhere = record
            elsewhere.app = "other"
            return elsewhere
        }
        for start in stride(from: 0, to: big.count, by: 2_000) { try await ledger.write(Array(big[start..<min(start + 2_000, big.count)])) }
        func before(_ a: DeliveryRecord, _ b: DeliveryRecord) -> Bool {
            if a.at != b.at { return a.at > b.at }
            for (x, y) in [(a.token, b.token), (a.jobID, b.jobID), (a.app, b.app)] where x != y { return x.utf8.lexicographicallyPrecedes(y.utf8) }
            return false
        }

        // Another job's records, newer than any, for one of the same users: written on and on
        // while the pages are read. A record newer than a page's cursor is in no page after it.
        let written = Progress()
        let writer = Task {
            var index = 0
            while !Task.isCancelled {
                let batch = (0..<50).map { offset in
                    DeliveryRecord(
                        jobID: "meanwhile", app: "demo", token: TestDeviceTokens.hex(index + offset, series: 0x0C0C), user: "u-0", outcome: "delivered",
                        attempts: 1, at: Self.now + 10_000_000 + Int64(index + offset))
                }
                index += 50
                do {
                    try await ledger.write(batch)
                } catch {
                    written.state.withLock { $0.failure = "\(error)" }
                    return
                }
                written.state.withLock { $0.batches += 1 }
            }
        }
        defer { writer.cancel() }
        /// Waits until the writer has written a batch more than `seen`: every page is read with writes between.
        /// Fails when the writer makes no progress for a minute (a stalled store), not on a total time.
        func writes(after seen: Int) async throws -> Int {
            let stalled = ContinuousClock.now + .seconds(60)
            while true {
                let (batches, failure) = written.state.withLock { $0 }
                if let failure { Issue.record("the writer failed: \(failure)"); return batches }
                if batches > seen { return batches }
                guard ContinuousClock.now < stalled else { throw TestFailure("the other job's writer wrote nothing for a minute") }
                try await Task.sleep(for: .milliseconds(1))
            }
        }

        func list(_ subject: DeliveryQuery.Subject, limit: Int) async throws -> (records: [DeliveryRecord], pages: [Int]) {
            var records: [DeliveryRecord] = []
            var pages: [Int] = []
            var after: DeliveryCursor?
            var seen = try await writes(after: 0)
            repeat {
                let page = try await ledger.page(DeliveryQuery(subject, limit: limit, after: after))
                records += page.records
                pages.append(page.records.count)
                // As a client holds it: the text, handed back.
                after = try page.next.map { try #require(DeliveryCursor($0.text)) }
                seen = try await writes(after: seen)
            } while after != nil
            return (records, pages)
        }

        let job = try await list(.job("big"), limit: 997)
        #expect(job.pages.dropLast().allSatisfy { $0 == 997 } && job.pages.count == big.count / 997 + 1, "\(job.pages)")
        #expect(job.records.count == big.count && Set(job.records) == Set(big), "none twice, none missing")
        #expect(job.records == big.sorted(by: before), "in order")

        let user = try await list(.user("u-0"), limit: 1_000)
        let mine = big.filter { $0.user == "u-0" }
        let keys = user.records.map { "\($0.at) \($0.token) \($0.jobID) \($0.app)" }
        #expect(Set(keys).count == keys.count, "none twice")
        #expect(user.records.filter { $0.jobID == "big" } == mine.sorted(by: before), "none of the job's missing, in order")
        #expect(zip(user.records, user.records.dropFirst()).allSatisfy { before($0, $1) }, "every record after the one before it")
        writer.cancel()
        _ = await writer.value
        let total = written.state.withLock { $0.batches }
        #expect(user.records.count < mine.count + total * 50, "records written after the first page are in no page")
    }
}

extension LedgerStoreTests {
    /// A ledger made before 0.4.3 was given the columns a record has since at its open: a record
    /// written now keeps APNs' timestamp and the message its result waits in.
    static func keepsNewColumns(_ ledger: any LedgerStore) async throws {
        var record = Self.record("j-old", 3)
        record.timestamp = 1_700_000_000_123
        record.resultsMessage = 9
        try await ledger.write([record])
        let back = try await ledger.finals(job: "j-old", app: "demo", tokens: [record.token])[record.token]
        #expect(back?.timestamp == 1_700_000_000_123 && back?.resultsMessage == 9, "the columns 0.4.3 added: \(String(describing: back))")
    }
}
