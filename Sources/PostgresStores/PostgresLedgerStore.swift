import Foundation
import Logging
import PostgresNIO
import Stores
import Synchronization

/// The delivery ledger on the registry's PostgreSQL, for a fleet on many hosts: `deliveries`
/// partitioned by day (UTC), so retention drops a day's partition instead of deleting its rows,
/// and the writers never wait behind an expiry. A record is unique per (job, app, token) within
/// its day; `finals` reads across the days. The keys are compared byte by byte (`COLLATE "C"`):
/// they are identifiers, never sorted for a reader, and a locale's rules would cost every index
/// insert a collation call.
///
/// Index inserts are most of the server's work per record, so the indexes are laid out for them.
/// Tokens look random, and an index on them is written at a random place per record: there is
/// one such index, the unique key, led by the token (a key led by the job also compared three
/// columns at every step of a descent, its job and app being the same for a whole batch). It
/// also serves the queries by token (a device's rows are few, sorted after), so the job gets the
/// second index, (job, at), written in order, which orders a job's records for `deliveries --job`
/// and, with `app` included, counts a job's records for `cancel_job` from the index. The user
/// index stays partial. COPY of 200,000 records with random tokens, in turns with the old layout:
/// 0.60–0.77 of its server CPU (docs/benchmarks.md, the ledger).
public final class PostgresLedgerStore: LedgerStore, PostgresBacked {
    let database: PostgresDatabase
    /// The day partitions known to exist.
    let ledgerDays = Mutex<Set<Int64>>([])

    init(database: PostgresDatabase) {
        self.database = database
    }

    /// Creates the partitioned table and its indexes when they are missing. Called once when the
    /// worker opens its ledger; workers starting together take turns. Without
    /// `rebuildingIndexes` (a command that only reads), a ledger of an older layout is left as it
    /// is: it answers the same questions, and the first worker rebuilds it.
    public func prepareLedger(rebuildingIndexes: Bool) async throws(StoreError) {
        try await transaction { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(7245311)", logger: self.logger)
            for statement in [
                """
                CREATE TABLE IF NOT EXISTS deliveries(
                  job_id TEXT COLLATE "C" NOT NULL, app TEXT COLLATE "C" NOT NULL, token TEXT COLLATE "C" NOT NULL, chunk TEXT,
                  user_id TEXT COLLATE "C", outcome TEXT NOT NULL,
                  status INTEGER, reason TEXT, apns_id TEXT, apns_unique_id TEXT, attempts INTEGER NOT NULL, at BIGINT NOT NULL,
                  day BIGINT NOT NULL, channel TEXT, request_id TEXT, apns_timestamp BIGINT, results_message BIGINT,
                  CONSTRAINT deliveries_once UNIQUE (token, job_id, app, day)) PARTITION BY LIST (day)
                """,
                """
                CREATE TABLE IF NOT EXISTS confirmed_messages(job_id TEXT COLLATE "C" NOT NULL, message BIGINT NOT NULL, day BIGINT NOT NULL,
                  PRIMARY KEY (job_id, message))
                """,
                // Devices without a user (explicit tokens) are never asked for by user: not indexed, as in SQLite.
                "CREATE INDEX IF NOT EXISTS deliveries_user ON deliveries(user_id, at) WHERE user_id IS NOT NULL",
                """
                CREATE TABLE IF NOT EXISTS idempotency(app TEXT NOT NULL, key TEXT NOT NULL, job_id TEXT NOT NULL, taken_at BIGINT NOT NULL,
                  PRIMARY KEY (app, key))
                """,
                // A key alone finds its job (`deliveries --key`, in whatever app): one index entry per keyed job.
                "CREATE INDEX IF NOT EXISTS idempotency_key ON idempotency(key)",
            ] {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
            }
            try await self.addLedgerColumns(on: connection)
            try await self.layLedgerIndexes(on: connection, rebuilding: rebuildingIndexes)
            try await PostgresScheduleStore.prepare(on: connection, logger: self.logger)
        }
    }

    /// Makes the job's index, and gives a ledger made by 0.4.0 or 0.4.1 (unique key led by the
    /// job, and an index on the token) the layout above, in the caller's transaction: the new
    /// unique key is built before the old one goes, so a record is never unguarded, and a crash
    /// midway leaves the old layout. The ledger's reads and writes wait meanwhile (adding a
    /// unique key locks the table); it happens once, at the first start of a worker of this
    /// version, never for a command that only reads.
    private func layLedgerIndexes(on connection: PostgresConnection, rebuilding: Bool) async throws {
        var uniques: [String] = []
        for try await name in try await connection.query(
            "SELECT conname::TEXT FROM pg_constraint WHERE conrelid = 'deliveries'::regclass AND contype = 'u'", logger: logger
        ).decode(String.self) {
            uniques.append(name)
        }
        var indexes: [String] = []
        for try await name in try await connection.query(
            "SELECT indexname::TEXT FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'deliveries'", logger: logger
        ).decode(String.self) {
            indexes.append(name)
        }
        let stale = uniques.filter { $0 != "deliveries_once" }
        let job = "CREATE INDEX IF NOT EXISTS deliveries_job ON deliveries(job_id, at) INCLUDE (app)"
        guard !uniques.contains("deliveries_once") || !stale.isEmpty || indexes.contains("deliveries_token") else {
            try await connection.query(PostgresQuery(unsafeSQL: job), logger: logger)
            return
        }
        guard rebuilding else {
            logger.notice("the delivery ledger has an older version's indexes; the first worker of this version to start rebuilds them")
            return
        }
        let started = ContinuousClock.now
        logger.notice("rebuilding the delivery ledger's indexes for this version's layout; the ledger's reads and writes wait until it is done")
        if !uniques.contains("deliveries_once") {
            try await connection.query("ALTER TABLE deliveries ADD CONSTRAINT deliveries_once UNIQUE (token, job_id, app, day)", logger: logger)
        }
        for name in stale {
            try await connection.query(PostgresQuery(unsafeSQL: "ALTER TABLE deliveries DROP CONSTRAINT \"\(name.replacingOccurrences(of: "\"", with: "\"\""))\""), logger: logger)
        }
        try await connection.query(PostgresQuery(unsafeSQL: job), logger: logger)
        try await connection.query("DROP INDEX IF EXISTS deliveries_token", logger: logger)
        logger.notice("delivery ledger's indexes rebuilt", metadata: ["took": "\(ContinuousClock.now - started)"])
    }

    /// Gives a ledger made before 0.4.3 the columns a record has since (NULL in its rows, no
    /// rewrite), under the caller's lock so workers starting together add them once. Looked up
    /// first: an ALTER, even one that adds nothing, locks the table and every partition until the
    /// start's transaction ends, and every worker's writes and reads would wait for it.
    private func addLedgerColumns(on connection: PostgresConnection) async throws {
        var present = 0
        for try await count in try await connection.query("""
            SELECT COUNT(*)::INT FROM pg_attribute
            WHERE attrelid = 'deliveries'::regclass AND attname IN ('apns_timestamp', 'results_message') AND NOT attisdropped
            """, logger: logger).decode(Int.self) {
            present = count
        }
        guard present < 2 else { return }
        try await connection.query(
            "ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS apns_timestamp BIGINT, ADD COLUMN IF NOT EXISTS results_message BIGINT", logger: logger)
    }

    /// The day's partition, made when missing (the name holds only the day's number).
    private func ensurePartition(_ day: Int64, on connection: PostgresConnection) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(7245312)", logger: logger)
        try await connection.query(
            PostgresQuery(unsafeSQL: "CREATE TABLE IF NOT EXISTS deliveries_\(day) PARTITION OF deliveries FOR VALUES IN (\(day))"), logger: logger)
    }

    /// Two batches at once, each on a pooled connection: a device's admission slot comes back
    /// when its batch commits, so a batch that waits for the one before it holds slots longer.
    public var concurrentWrites: Int { 2 }

    public func write(_ records: [DeliveryRecord]) async throws(StoreError) {
        guard !records.isEmpty else { return }
        let days = Set(records.map { DeliveryRecord.day(ofMilliseconds: $0.at) })
        let missing = days.subtracting(ledgerDays.withLock { $0 })
        if !missing.isEmpty {
            try await transaction { connection in
                for day in missing.sorted() { try await self.ensurePartition(day, on: connection) }
            }
            ledgerDays.withLock { $0.formUnion(missing) }
        }
        // COPY is the cheapest way in for the server (no statement to plan, no JSON to parse), and
        // a statement is a transaction of its own: one round trip a batch, not a BEGIN, COPY and
        // COMMIT. It cannot skip a record already there. That happens only when a chunk is done
        // again after a crash between the ledger's commit and the broker's ack; then the batch
        // goes in again as an INSERT that skips what the ledger holds (nothing of the COPY stays).
        let duplicate: Bool = try await read { connection in
            do {
                try await connection.copyFrom(table: "deliveries", columns: Self.copyColumns, logger: self.logger) { writer in
                    try await writer.write(LedgerCopyRows.buffer(records))
                }
                return false
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
                return true
            }
        }
        if duplicate {
            try await read { connection in try await self.insertSkippingKnown(records, on: connection) }
        }
    }

    private func insertSkippingKnown(_ records: [DeliveryRecord], on connection: PostgresConnection) async throws {
        let rows = String(decoding: try JSONEncoder().encode(records.map(InsertRow.init)), as: UTF8.self)
        try await connection.query("""
            INSERT INTO deliveries(job_id, app, token, chunk, user_id, outcome, status, reason, apns_id, apns_unique_id, attempts, at, day, channel, request_id,
              apns_timestamp, results_message)
            SELECT job_id, app, token, chunk, "user", outcome, status, reason, apns_id, apns_unique_id, attempts, at, at / 86400000, channel, request_id,
              timestamp, results_message
            FROM jsonb_to_recordset(\(rows)::jsonb) AS r(job_id TEXT, app TEXT, token TEXT, chunk TEXT, "user" TEXT, outcome TEXT, status INTEGER,
              reason TEXT, apns_id TEXT, apns_unique_id TEXT, attempts INTEGER, at BIGINT, channel TEXT, request_id TEXT, timestamp BIGINT,
              results_message BIGINT)
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    /// A record as `jsonb_to_recordset` reads it: the columns as stored (the service's message id
    /// in `apns_id`, the results message), not as a record is shown.
    private struct InsertRow: Encodable {
        let job_id: String, app: String, token: String, chunk: String?, user: String?, outcome: String, status: Int?, reason: String?
        let apns_id: String?, apns_unique_id: String?, attempts: Int, at: Int64, channel: String?, request_id: String?, timestamp: Int64?
        let results_message: Int64?

        init(_ record: DeliveryRecord) {
            (job_id, app, token, chunk, user, outcome, status, reason) =
                (record.jobID, record.app, record.token, record.chunk, record.user, record.outcome, record.status, record.reason)
            (apns_id, apns_unique_id, attempts, at, channel, request_id, timestamp, results_message) =
                (record.serviceMessageID, record.apnsUniqueID, record.attempts, record.at, record.channel, record.requestID, record.timestamp,
                 record.resultsMessage)
        }
    }

    static let copyColumns = [
        "job_id", "app", "token", "chunk", "user_id", "outcome", "status", "reason", "apns_id", "apns_unique_id", "attempts", "at", "day", "channel",
        "request_id", "apns_timestamp", "results_message",
    ]

    public func confirm(job: String, app: String, messages: [Int64], answered: [String], at: Int64) async throws(StoreError) {
        let day = DeliveryRecord.day(ofMilliseconds: at)
        if !messages.isEmpty {
            try await read { connection in
                try await connection.query("""
                    INSERT INTO confirmed_messages(job_id, message, day) SELECT \(job), message, \(day) FROM unnest(\(messages)::BIGINT[]) AS message
                    ON CONFLICT DO NOTHING
                    """, logger: self.logger)
            }
        }
        if !answered.isEmpty {
            try await read { connection in
                try await connection.query(
                    "UPDATE deliveries SET results_message = NULL WHERE token = ANY(\(answered)) AND job_id = \(job) AND app = \(app)", logger: self.logger)
            }
        }
    }

    public func finals(job: String, app: String, tokens: [String]) async throws(StoreError) -> [String: DeliveryRecord] {
        guard !tokens.isEmpty else { return [:] }
        // A record's message, while no mark says the broker confirmed it.
        let rows = try await read { connection in
            try await Self.records(connection.query("""
                SELECT \(unescaped: Self.columns), CASE WHEN d.results_message IS NULL
                  OR EXISTS (SELECT 1 FROM confirmed_messages AS c WHERE c.job_id = d.job_id AND c.message = d.results_message)
                  THEN NULL ELSE d.results_message END
                FROM deliveries AS d WHERE d.job_id = \(job) AND d.app = \(app) AND d.token = ANY(\(tokens))
                """, logger: self.logger), pending: true)
        }
        return Dictionary(rows.map { ($0.token, $0) }, uniquingKeysWith: { first, _ in first })
    }

    public func deliveries(_ query: DeliveryQuery) async throws(StoreError) -> [DeliveryRecord] {
        // The subject's condition, around its one parameter.
        let (subject, opening, closing): (String, String, String) = switch query.subject {
        case .job(let id): (id, "job_id = ", "")
        case .user(let user): (user, "user_id = ", "")
        case .token(let token): (token, "token = ", "")
        case .idempotencyKey(let key): (key, "(job_id, app) IN (SELECT job_id, app FROM idempotency WHERE key = ", ")")
        }
        let bounds = query.bounds, limit = query.limit, app = query.app, owner = query.owner
        let tieToken = bounds.tie?.token, tieJob = bounds.tie?.jobID, tieApp = bounds.tie?.app
        // `DeliveryQuery.bounds`: a range on `at` the (job, at) and (user, at) indexes can use, and
        // at its upper end, the instant a page before ended in, the records after its last one.
        return try await read { connection in
            try await Self.records(connection.query("""
                SELECT \(unescaped: Self.columns) FROM deliveries WHERE \(unescaped: opening)\(subject)\(unescaped: closing)
                AND at >= \(bounds.lower) AND at <= \(bounds.upper)
                AND (\(tieToken)::TEXT IS NULL OR at < \(bounds.upper) OR (token, job_id, app) > (\(tieToken)::TEXT, \(tieJob)::TEXT, \(tieApp)::TEXT))
                AND (\(app)::TEXT IS NULL OR app = \(app)) AND (\(owner)::TEXT IS NULL OR user_id = \(owner))
                ORDER BY at DESC, token, job_id, app LIMIT \(limit)
                """, logger: self.logger))
        }
    }

    /// Drops each day's partition wholly before `before`: one catalogue change per day, however
    /// many rows it held.
    public func expire(before: Int64) async throws(StoreError) -> Int {
        let cutoff = DeliveryRecord.day(ofMilliseconds: before)
        let days = try await read { connection in
            var days: [Int64] = []
            for try await name in try await connection.query(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'deliveries'::regclass",
                logger: self.logger
            ).decode(String.self) {
                if let day = Int64(name.dropFirst("deliveries_".count)), day < cutoff { days.append(day) }
            }
            return days
        }
        var removed = 0
        for day in days.sorted() {
            var count = 0
            try await transaction { connection in
                for try await rows in try await connection.query(PostgresQuery(unsafeSQL: "SELECT COUNT(*) FROM deliveries_\(day)"), logger: self.logger).decode(Int.self) {
                    count = rows
                }
                try await connection.query(PostgresQuery(unsafeSQL: "DROP TABLE IF EXISTS deliveries_\(day)"), logger: self.logger)
            }
            removed += count
            ledgerDays.withLock { _ = $0.remove(day) }
        }
        try await transaction { connection in
            try await connection.query("DELETE FROM confirmed_messages WHERE day < \(cutoff)", logger: self.logger)
            try await connection.query("DELETE FROM idempotency WHERE taken_at < \(before)", logger: self.logger)
        }
        return removed
    }

    public func claim(key: String, app: String, job: String, again: Bool, now: Int64, freeBefore: Int64) async throws(StoreError) -> String? {
        // One statement takes a free or lapsed key; a worker asking at the same moment waits on
        // the key's row and finds it taken.
        try await read { connection in
            var taken = false
            for try await _ in try await connection.query("""
                INSERT INTO idempotency(app, key, job_id, taken_at) VALUES (\(app), \(key), \(job), \(now))
                ON CONFLICT (app, key) DO UPDATE SET job_id = EXCLUDED.job_id, taken_at = EXCLUDED.taken_at WHERE idempotency.taken_at < \(freeBefore)
                RETURNING job_id
                """, logger: self.logger).decode(String.self) {
                taken = true
            }
            if taken { return nil }
            var holder: String?
            for try await found in try await connection.query("SELECT job_id FROM idempotency WHERE app = \(app) AND key = \(key)", logger: self.logger).decode(String.self) {
                holder = found
            }
            return holder == job && again ? nil : holder
        }
    }

    @discardableResult
    public func expireKeys(takenBefore: Int64) async throws(StoreError) -> Int {
        try await read { connection in
            var removed = 0
            for try await count in try await connection.query(
                "WITH gone AS (DELETE FROM idempotency WHERE taken_at < \(takenBefore) RETURNING 1) SELECT count(*)::BIGINT FROM gone", logger: self.logger
            ).decode(Int.self) {
                removed = count
            }
            return removed
        }
    }

    static let columns = "job_id, app, token, chunk, user_id, outcome, status, reason, apns_id, apns_unique_id, attempts, at, channel, request_id, apns_timestamp"

    /// - Parameter pending: the rows end with the record's message while it is not marked confirmed (`finals`).
    private static func records(_ rows: PostgresRowSequence, pending: Bool = false) async throws -> [DeliveryRecord] {
        var records: [DeliveryRecord] = []
        for try await row in rows {
            let c = try row.decode((String, String, String, String?, String?, String, Int?, String?, String?, String?, Int, Int64, String?, String?, Int64?).self)
            var record = DeliveryRecord(
                jobID: c.0, chunk: c.3, app: c.1, token: c.2, user: c.4, outcome: c.5, status: c.6, reason: c.7, apnsUniqueID: c.9,
                attempts: c.10, at: c.11, channel: c.12, requestID: c.13, timestamp: c.14,
                resultsMessage: pending ? try PostgresRandomAccessRow(row)[15].decode(Int64?.self) : nil)
            record.serviceMessageID = c.8
            records.append(record)
        }
        return records
    }
}
