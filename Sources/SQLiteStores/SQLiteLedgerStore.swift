import CSQLite
import Stores
import Foundation
import Synchronization

/// The embedded ledger: a `deliveries` table in an SQLite file (the registry's, or one of its
/// own), in WAL mode so the workers of one host share it and readers never wait for the writer.
/// Retention deletes whole days a few thousand rows at a time, so a large expiry never holds
/// the writers' lock for long. The unique key leads with the token: tokens look random, and one
/// index written at random places per record (it also serves the questions by token) costs
/// less than 0.4.1's two, its job-led key and (token, at).
public final class SQLiteLedgerStore: BlockingLedgerWrites {
    private let state: Mutex<Connection>
    /// The file, which the schedule shares.
    public let path: String

    private final class Connection: @unchecked Sendable {
        let database: SQLiteDatabase
        let insert, finals, confirm, answered, expireConfirmed, byJob, byUser, byToken, byKey, expireSome, take, holder, expireKeys: SQLiteStatement

        init(_ database: SQLiteDatabase) throws(StoreError) {
            self.database = database
            try database.execute("""
                CREATE TABLE IF NOT EXISTS deliveries(
                  job_id TEXT NOT NULL, app TEXT NOT NULL, token TEXT NOT NULL, chunk TEXT, user_id TEXT, outcome TEXT NOT NULL,
                  status INTEGER, reason TEXT, apns_id TEXT, apns_unique_id TEXT, attempts INTEGER NOT NULL, at INTEGER NOT NULL,
                  day INTEGER NOT NULL, channel TEXT, request_id TEXT, apns_timestamp INTEGER, results_message INTEGER,
                  UNIQUE(token, job_id, app));
                CREATE INDEX IF NOT EXISTS deliveries_user ON deliveries(user_id, at) WHERE user_id IS NOT NULL;
                DROP INDEX IF EXISTS deliveries_day;
                CREATE TABLE IF NOT EXISTS idempotency(app TEXT NOT NULL, key TEXT NOT NULL, job_id TEXT NOT NULL, taken_at INTEGER NOT NULL,
                  PRIMARY KEY (app, key));
                CREATE TABLE IF NOT EXISTS confirmed_messages(job_id TEXT NOT NULL, message INTEGER NOT NULL, day INTEGER NOT NULL,
                  PRIMARY KEY (job_id, message)) WITHOUT ROWID;
                """)
            // A file made before 0.4.3 gains the columns a record has since (NULL in its rows).
            // Looked at first, so an open of an upgraded file writes nothing; added in one write
            // transaction, looked at again in it, so workers opening the file together add them once.
            func missingColumns() throws(StoreError) -> [String] {
                var present = Set<String>()
                try database.prepare("SELECT name FROM pragma_table_info('deliveries')").run([]) { row in
                    if let name = row.text(0) { present.insert(name) }
                }
                return ["apns_timestamp", "results_message"].filter { !present.contains($0) }
            }
            if try !missingColumns().isEmpty {
                try database.transaction { () throws(StoreError) in
                    for column in try missingColumns() { try database.execute("ALTER TABLE deliveries ADD COLUMN \(column) INTEGER") }
                }
            }
            // A file made before 0.4.2 keeps its layout: its unique key leads with the job (and
            // serves the questions by job), and an index on (token, time) serves those by token.
            // A table's unique key cannot change in place, and a rebuild would hold every writer
            // of the host up for minutes; the old layout is as correct, at one more index insert
            // at a random place per record. A new file's unique key leads with the token and
            // serves those questions; (job, time) serves the job's, written in order.
            // Told by the first column of the table's own unique key, not by the other indexes:
            // 0.4.1 run on a newer file adds its token index, which a newer worker drops again.
            var madeBefore = false
            try database.prepare("""
                SELECT info.name FROM pragma_index_list('deliveries') AS list, pragma_index_info(list.name) AS info
                WHERE list.origin = 'u' AND info.seqno = 0
                """).run([]) { row in
                madeBefore = madeBefore || row.text(0) == "job_id"
            }
            if !madeBefore {
                // `app` in the job's index: `cancel_job` counts a job's records from it alone.
                try database.execute("""
                    CREATE INDEX IF NOT EXISTS deliveries_job ON deliveries(job_id, at, app);
                    DROP INDEX IF EXISTS deliveries_token;
                    """)
            }
            // A key alone finds its job (`deliveries --key`, in whatever app): one index entry
            // per keyed job's claim, not per device.
            try database.execute("CREATE INDEX IF NOT EXISTS idempotency_key ON idempotency(key)")
            take = try database.prepare("""
                INSERT INTO idempotency(app, key, job_id, taken_at) VALUES (?1, ?2, ?3, ?4)
                ON CONFLICT(app, key) DO UPDATE SET job_id = excluded.job_id, taken_at = excluded.taken_at WHERE idempotency.taken_at < ?5
                RETURNING job_id
                """)
            holder = try database.prepare("SELECT job_id FROM idempotency WHERE app = ?1 AND key = ?2")
            expireKeys = try database.prepare("DELETE FROM idempotency WHERE taken_at < ?1")
            insert = try database.prepare("""
                INSERT INTO deliveries(job_id, app, token, chunk, user_id, outcome, status, reason, apns_id, apns_unique_id, attempts, at, day, channel, request_id,
                  apns_timestamp, results_message)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17) ON CONFLICT DO NOTHING
                """)
            let columns = "job_id, app, token, chunk, user_id, outcome, status, reason, apns_id, apns_unique_id, attempts, at, channel, request_id, apns_timestamp"
            // `DeliveryQuery.bounds`: a range on `at` the time indexes can use, and at its upper
            // end, the instant a page before ended in, the records after its last one.
            let window = """
                at >= ?2 AND at <= ?3 AND (?7 IS NULL OR at < ?3 OR (token, job_id, app) > (?7, ?8, ?9))
                AND (?5 IS NULL OR app = ?5) AND (?6 IS NULL OR user_id = ?6) ORDER BY at DESC, token, job_id, app LIMIT ?4
                """
            // A record's message, while no mark says the broker confirmed it.
            finals = try database.prepare("""
                SELECT \(columns), CASE WHEN results_message IS NULL
                  OR EXISTS (SELECT 1 FROM confirmed_messages AS c WHERE c.job_id = deliveries.job_id AND c.message = deliveries.results_message)
                  THEN NULL ELSE results_message END
                FROM deliveries WHERE job_id = ?1 AND app = ?2 AND token IN (SELECT value FROM json_each(?3))
                """)
            confirm = try database.prepare("INSERT INTO confirmed_messages(job_id, message, day) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING")
            answered = try database.prepare(
                "UPDATE deliveries SET results_message = NULL WHERE token IN (SELECT value FROM json_each(?3)) AND job_id = ?1 AND app = ?2")
            expireConfirmed = try database.prepare("DELETE FROM confirmed_messages WHERE day < ?1")
            byJob = try database.prepare("SELECT \(columns) FROM deliveries WHERE job_id = ?1 AND \(window)")
            byUser = try database.prepare("SELECT \(columns) FROM deliveries WHERE user_id = ?1 AND \(window)")
            byToken = try database.prepare("SELECT \(columns) FROM deliveries WHERE token = ?1 AND \(window)")
            byKey = try database.prepare(
                "SELECT \(columns) FROM deliveries WHERE (job_id, app) IN (SELECT job_id, app FROM idempotency WHERE key = ?1) AND \(window)")
            // Records go in in time order, so the oldest have the lowest rowids: each step looks at
            // the next rows in rowid order only and deletes those past the retention; a step that
            // deletes fewer than it looked at has reached the kept days. No index on the day to
            // keep up on every write, and no scan of the kept rows.
            expireSome = try database.prepare("DELETE FROM deliveries WHERE rowid IN (SELECT rowid FROM deliveries ORDER BY rowid LIMIT ?2) AND day < ?1")
        }
    }

    /// Rows deleted per step of an expiry.
    static let expiryStep: Int64 = 5_000

    /// The page size of a new ledger file: SQLite's default, not the registry's 16 KiB. A record
    /// lands on a page of its own in each index led by a token or a job id (both random), and a
    /// commit writes each page it changed whole into the WAL: with 16 KiB pages a record of a
    /// commit of one to three wrote 44–56 KiB of frames, with 4 KiB pages 14–17 KiB
    /// (docs/benchmarks.md). At 1 KiB an index key of an FCM token, a job id and an app would
    /// outgrow what a page holds in place (about 230 bytes) and spill onto overflow pages. A file made before keeps its 16 KiB pages, and so
    /// does the registry's file, where the ledger is kept unless `ledger.sqlite` names its own.
    public static let pageSize = 4_096

    /// Opens (creating) the file and the table.
    public init(path: String) throws(StoreError) {
        self.path = path
        state = Mutex(try Connection(SQLiteDatabase(path: path, pageSize: Self.pageSize)))
    }

    /// The connection's own serial queue (run on a thread of the system's pool, never one of
    /// Swift's cooperative threads): every use of it runs here, in turn, but the ledger writer's
    /// batches (`writeNow`, from the writer's own thread; the connection's lock between them). A batch's transaction
    /// takes milliseconds of CPU, a claim or a write may wait up to `busy_timeout` for another
    /// worker of the host holding the file's write lock, and an expiry step deletes thousands of
    /// rows. Run on the caller's thread, each would hold one of the few threads Swift's
    /// concurrency has (one per core), and every device's send and result on this worker would
    /// queue behind it; so would a read of `finals` that waits for a batch to commit.
    private let queue = DispatchQueue(label: "pushworker.ledger.sqlite")

    /// Runs `body` on the connection's queue, holding the connection. The lock is what lets
    /// `Connection` be shared; only the writer's thread contends for it, so a read of `finals`
    /// may wait for a batch's commit on the queue's thread, never on a cooperative one.
    private func onQueue<T: Sendable>(_ body: @escaping @Sendable (Connection) throws(StoreError) -> T) async throws(StoreError) -> T {
        let outcome: Result<T, StoreError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(StoreError) in
                    try self.state.withLock { connection throws(StoreError) in try body(connection) }
                })
            }
        }
        return try outcome.get()
    }

    public func write(_ records: [DeliveryRecord]) async throws(StoreError) {
        guard !records.isEmpty else { return }
        try await onQueue { connection throws(StoreError) in try Self.insert(records, on: connection) }
    }

    /// `write` on the caller's thread: the ledger writer's own, which nothing else waits on.
    public func writeNow(_ records: [DeliveryRecord]) throws(StoreError) {
        guard !records.isEmpty else { return }
        try state.withLock { connection throws(StoreError) in try Self.insert(records, on: connection) }
    }

    private static func insert(_ records: [DeliveryRecord], on connection: Connection) throws(StoreError) {
        // In token order, its day first (rowids must rise with the day: the expiry counts on it;
        // within a day the batch's own order breaks ties, so the first of two results stays): a
        // batch's inserts then visit the pages of the index on tokens (a new file's unique key,
        // an older file's token index) from left to right, each once, instead of one at random
        // per record. It matters once that index outgrows SQLite's page cache, as a ledger of
        // weeks does: batches of 2,000 records with random tokens cost 8–22 % less CPU per record
        // so, in three pairs (docs/benchmarks.md, the ledger). Tokens are compared as bytes, as
        // the index does, mostly by their first eight alone: one integer compare, no string's.
        let order = records.withUnsafeBufferPointer { records in
            records.indices.map { SortKey(day: DeliveryRecord.day(ofMilliseconds: records[$0].at), token: records[$0].token, index: $0) }
        }.sorted { a, b in
            if a.day != b.day { return a.day < b.day }
            if a.head != b.head { return a.head < b.head }
            if a.index == b.index { return false }
            let (first, second) = (records[a.index].token.utf8, records[b.index].token.utf8)
            return first.elementsEqual(second) ? a.index < b.index : first.lexicographicallyPrecedes(second)
        }
        try connection.database.transaction { () throws(StoreError) in
            var row = SQLiteRow()
            try records.withUnsafeBufferPointer { records throws(StoreError) in
                for key in order {
                    row.removeAll()
                    row.append(records[key.index].jobID)
                    row.append(records[key.index].app)
                    row.append(records[key.index].token)
                    row.append(records[key.index].chunk)
                    row.append(records[key.index].user)
                    row.append(records[key.index].outcome)
                    row.append(records[key.index].status.map(Int64.init))
                    row.append(records[key.index].reason)
                    row.append(records[key.index].serviceMessageID)
                    row.append(records[key.index].apnsUniqueID)
                    row.append(Int64(records[key.index].attempts))
                    row.append(records[key.index].at)
                    row.append(key.day)
                    row.append(records[key.index].channel)
                    row.append(records[key.index].requestID)
                    row.append(records[key.index].timestamp)
                    row.append(records[key.index].resultsMessage)
                    try connection.insert.run(row)
                }
            }
        }
    }

    /// A record's place in its batch's order: its day, then its token's first eight bytes as a
    /// big-endian number (shorter tokens padded with zeros), which orders as the bytes do.
    private struct SortKey {
        let day: Int64
        let head: UInt64
        let index: Int

        init(day: Int64, token: String, index: Int) {
            self.day = day
            self.index = index
            var head: UInt64 = 0
            var taken = 0
            for byte in token.utf8.prefix(8) {
                head = head << 8 | UInt64(byte)
                taken += 1
            }
            self.head = taken == 8 ? head : head << (8 * UInt64(8 - taken))
        }
    }

    /// Tokens as one JSON array, bound as one parameter and read with `json_each`.
    private static func jsonList(_ tokens: [String]) -> String {
        JSONText.list(tokens)
    }

    public func finals(job: String, app: String, tokens: [String]) async throws(StoreError) -> [String: DeliveryRecord] {
        guard !tokens.isEmpty else { return [:] }
        let list = Self.jsonList(tokens)
        return try await onQueue { connection throws(StoreError) in
            var found: [String: DeliveryRecord] = [:]
            try connection.finals.run([.text(job), .text(app), .text(list)]) { row in
                var record = Self.record(row)
                record.resultsMessage = row.text(15) == nil ? nil : row.integer(15)
                found[record.token] = record
            }
            return found
        }
    }

    public func confirm(job: String, app: String, messages: [Int64], answered: [String], at: Int64) async throws(StoreError) {
        guard !messages.isEmpty || !answered.isEmpty else { return }
        let tokens = Self.jsonList(answered)
        try await onQueue { connection throws(StoreError) in
            try connection.database.transaction { () throws(StoreError) in
                for message in messages {
                    try connection.confirm.run([.text(job), .integer(message), .integer(DeliveryRecord.day(ofMilliseconds: at))])
                }
                if !answered.isEmpty { try connection.answered.run([.text(job), .text(app), .text(tokens)]) }
            }
        }
    }

    public func deliveries(_ query: DeliveryQuery) async throws(StoreError) -> [DeliveryRecord] {
        try await onQueue { connection throws(StoreError) in
            let (statement, subject): (SQLiteStatement, String) = switch query.subject {
            case .job(let id): (connection.byJob, id)
            case .user(let user): (connection.byUser, user)
            case .token(let token): (connection.byToken, token)
            case .idempotencyKey(let key): (connection.byKey, key)
            }
            func text(_ value: String?) -> SQLiteStatement.Value { value.map { .text($0) } ?? .null }
            let bounds = query.bounds
            var records: [DeliveryRecord] = []
            try statement.run([
                .text(subject), .integer(bounds.lower), .integer(bounds.upper), .integer(Int64(query.limit)), text(query.app), text(query.owner),
                text(bounds.tie?.token), text(bounds.tie?.jobID), text(bounds.tie?.app),
            ]) { row in
                records.append(Self.record(row))
            }
            return records
        }
    }

    public func expire(before: Int64) async throws(StoreError) -> Int {
        let day = DeliveryRecord.day(ofMilliseconds: before)
        var total = 0
        while true {
            // One step at a time on the connection's thread: the writes queued meanwhile go between steps.
            let removed = try await onQueue { connection throws(StoreError) -> Int in
                try connection.expireSome.run([.integer(day), .integer(Self.expiryStep)])
                return connection.database.changes
            }
            total += removed
            if removed < Self.expiryStep {
                try await onQueue { connection throws(StoreError) in try connection.expireConfirmed.run([.integer(day)]) }
                try await onQueue { connection throws(StoreError) in try connection.expireKeys.run([.integer(before)]) }
                return total
            }
        }
    }

    public func claim(key: String, app: String, job: String, again: Bool, now: Int64, freeBefore: Int64) async throws(StoreError) -> String? {
        try await onQueue { connection throws(StoreError) -> String? in
            try connection.database.transaction { () throws(StoreError) -> String? in
                var taken = false
                try connection.take.run([.text(app), .text(key), .text(job), .integer(now), .integer(freeBefore)]) { _ in taken = true }
                if taken { return nil }
                var holder: String?
                try connection.holder.run([.text(app), .text(key)]) { row in holder = row.text(0) }
                return holder == job && again ? nil : holder
            }
        }
    }

    @discardableResult
    public func expireKeys(takenBefore: Int64) async throws(StoreError) -> Int {
        try await onQueue { connection throws(StoreError) -> Int in
            try connection.expireKeys.run([.integer(takenBefore)])
            return connection.database.changes
        }
    }

    private static func record(_ row: SQLiteStatement.Row) -> DeliveryRecord {
        var record = DeliveryRecord(
            jobID: row.text(0) ?? "", chunk: row.text(3), app: row.text(1) ?? "", token: row.text(2) ?? "", user: row.text(4),
            outcome: row.text(5) ?? "", status: row.text(6) == nil ? nil : Int(row.integer(6)), reason: row.text(7),
            apnsUniqueID: row.text(9), attempts: Int(row.integer(10)), at: row.integer(11), channel: row.text(12), requestID: row.text(13),
            timestamp: row.text(14) == nil ? nil : row.integer(14))
        record.serviceMessageID = row.text(8)
        return record
    }
}
