import Logging
import PostgresNIO
import Stores

/// The schedule in the registry's PostgreSQL, beside the ledger, for a fleet on many hosts. A
/// release takes its jobs with `FOR UPDATE SKIP LOCKED`: workers asking at once take different
/// jobs and never wait for each other.
public final class PostgresScheduleStore: ScheduleStore, PostgresBacked {
    let database: PostgresDatabase
    /// The holds of the jobs in flight, written together: while one INSERT is out, the holds that
    /// come wait and go in the next one, many rows in one statement. Each was a statement of its
    /// own; 100,000 jobs held within seconds queued behind one another for the pool's connections,
    /// and the releases of the first ones to come due waited behind them.
    private let holds: LookupCoalescer<HeldJob, Bool>

    init(database: PostgresDatabase) {
        self.database = database
        holds = LookupCoalescer(maximumItems: 500) { [database] _, jobs throws(StoreError) in
            try await Self.insert(jobs, in: database)
            return [:]
        }
    }

    /// Creates the table when missing; called with `prepareLedger`.
    static func prepare(on connection: PostgresConnection, logger: Logger) async throws {
        for statement in [
            """
            CREATE TABLE IF NOT EXISTS scheduled_jobs(
              app TEXT COLLATE "C" NOT NULL, job_id TEXT COLLATE "C" NOT NULL, idempotency_key TEXT COLLATE "C", release_at BIGINT NOT NULL,
              body TEXT NOT NULL, reply_to TEXT, held_at BIGINT NOT NULL, state TEXT NOT NULL, ended_at BIGINT, lease_until BIGINT,
              releases INTEGER NOT NULL DEFAULT 0, chunk TEXT, PRIMARY KEY (app, job_id))
            """,
            "CREATE INDEX IF NOT EXISTS scheduled_jobs_due ON scheduled_jobs(release_at) WHERE state = 'waiting'",
            "CREATE INDEX IF NOT EXISTS scheduled_jobs_key ON scheduled_jobs(idempotency_key) WHERE idempotency_key IS NOT NULL",
            "CREATE INDEX IF NOT EXISTS scheduled_jobs_id ON scheduled_jobs(job_id)",
            """
            CREATE TABLE IF NOT EXISTS job_runs(
              app TEXT COLLATE "C" NOT NULL, job_id TEXT COLLATE "C" NOT NULL, idempotency_key TEXT COLLATE "C", devices INTEGER NOT NULL,
              chunks INTEGER NOT NULL, started_at BIGINT NOT NULL, cancelled_at BIGINT, PRIMARY KEY (app, job_id))
            """,
            "CREATE INDEX IF NOT EXISTS job_runs_id ON job_runs(job_id)",
            "CREATE INDEX IF NOT EXISTS job_runs_key ON job_runs(idempotency_key) WHERE idempotency_key IS NOT NULL",
            """
            CREATE TABLE IF NOT EXISTS cap_counts(
              app TEXT COLLATE "C" NOT NULL, cap TEXT COLLATE "C" NOT NULL, user_id TEXT COLLATE "C" NOT NULL, job_id TEXT COLLATE "C" NOT NULL,
              at BIGINT NOT NULL, PRIMARY KEY (app, cap, user_id, job_id))
            """,
            "CREATE INDEX IF NOT EXISTS cap_counts_at ON cap_counts(app, cap, user_id, at)",
            "CREATE INDEX IF NOT EXISTS cap_counts_expiry ON cap_counts(at)",
        ] {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
    }

    public func hold(_ job: HeldJob) async throws(StoreError) {
        _ = try await holds.values(group: "", items: [job])
    }

    /// One statement for all `jobs`, no transaction around it: the rows as one JSON parameter
    /// (`json_to_recordset`), so a batch is one round trip whatever its size; a job already held
    /// (its id again, in this batch or before) is left as it is.
    private static func insert(_ jobs: [HeldJob], in database: PostgresDatabase) async throws(StoreError) {
        var rows: [UInt8] = [UInt8(ascii: "[")]
        func text(_ key: String, _ value: String?) {
            rows += "\"\(key)\":".utf8
            if let value { JSONText.appendString(value, to: &rows) } else { rows += "null".utf8 }
        }
        for (index, job) in jobs.enumerated() {
            rows += (index == 0 ? "{" : ",{").utf8
            text("app", job.app)
            rows.append(UInt8(ascii: ","))
            text("job_id", job.jobID)
            rows.append(UInt8(ascii: ","))
            text("idempotency_key", job.idempotencyKey)
            rows += ",\"release_at\":\(job.releaseAt),\"held_at\":\(job.heldAt),".utf8
            text("body", job.body)
            rows.append(UInt8(ascii: ","))
            text("reply_to", job.replyTo)
            rows.append(UInt8(ascii: ","))
            text("chunk", job.chunk)
            rows.append(UInt8(ascii: "}"))
        }
        rows.append(UInt8(ascii: "]"))
        let json = String(decoding: rows, as: UTF8.self)
        try await database.read { connection in
            try await connection.query("""
                INSERT INTO scheduled_jobs(app, job_id, idempotency_key, release_at, body, reply_to, held_at, state, chunk)
                SELECT app, job_id, idempotency_key, release_at, body, reply_to, held_at, 'waiting', chunk
                FROM json_to_recordset(\(json)::json) AS j(
                  app TEXT, job_id TEXT, idempotency_key TEXT, release_at BIGINT, body TEXT, reply_to TEXT, held_at BIGINT, chunk TEXT)
                ON CONFLICT DO NOTHING
                """, logger: database.logger)
        }
    }

    public func due(now: Int64, leaseUntil: Int64, limit: Int) async throws(StoreError) -> [HeldJob] {
        try await read { connection in
            try await Self.jobs(connection.query("""
                UPDATE scheduled_jobs SET lease_until = \(leaseUntil), releases = releases + 1
                WHERE (app, job_id) IN (SELECT app, job_id FROM scheduled_jobs
                  WHERE state = 'waiting' AND release_at <= \(now) AND (lease_until IS NULL OR lease_until < \(now))
                  ORDER BY release_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING \(unescaped: Self.scheduleColumns)
                """, logger: self.logger))
        }.sorted { ($0.releaseAt, $0.app, $0.jobID) < ($1.releaseAt, $1.app, $1.jobID) }
    }

    public func released(_ jobs: [HeldJob], at: Int64) async throws(StoreError) {
        guard !jobs.isEmpty else { return }
        try await read { connection in
            try await connection.query("""
                UPDATE scheduled_jobs SET state = 'released', ended_at = \(at), lease_until = NULL
                WHERE state = 'waiting' AND (app, job_id) IN (SELECT * FROM UNNEST(\(jobs.map(\.app))::TEXT[], \(jobs.map(\.jobID))::TEXT[]))
                """, logger: self.logger)
        }
    }

    public func cancel(_ name: HeldJobName, at: Int64) async throws(StoreError) -> ScheduleCancellation {
        var outcome = ScheduleCancellation.unknown
        try await transaction { connection in
            guard var job = try await self.one(name, on: connection, locking: true) else {
                outcome = try await self.stop(name, at: at, on: connection)
                return
            }
            guard job.state == .waiting else {
                outcome = .ended(job)
                return
            }
            try await connection.query(
                "UPDATE scheduled_jobs SET state = 'cancelled', ended_at = \(at) WHERE app = \(job.app) AND job_id = \(job.jobID)", logger: self.logger)
            job.state = .cancelled
            job.endedAt = at
            outcome = .cancelled(job)
        }
        return outcome
    }

    public func scheduled(app: String?, state: HeldJob.State?, limit: Int) async throws(StoreError) -> [HeldJob] {
        try await read { connection in
            try await Self.jobs(connection.query("""
                SELECT \(unescaped: Self.scheduleColumns) FROM scheduled_jobs WHERE (\(app)::TEXT IS NULL OR app = \(app))
                AND (\(state?.rawValue)::TEXT IS NULL OR state = \(state?.rawValue)) ORDER BY release_at, app, job_id LIMIT \(limit)
                """, logger: self.logger))
        }
    }

    public func scheduledJob(_ name: HeldJobName) async throws(StoreError) -> HeldJob? {
        try await read { connection in try await self.one(name, on: connection, locking: false) }
    }

    public func expireSchedule(before: Int64) async throws(StoreError) -> Int {
        try await read { connection in
            var count = 0
            for try await _ in try await connection.query(
                "DELETE FROM scheduled_jobs WHERE state <> 'waiting' AND ended_at < \(before) RETURNING 1", logger: self.logger) {
                count += 1
            }
            for try await _ in try await connection.query("DELETE FROM job_runs WHERE started_at < \(before) RETURNING 1", logger: self.logger) {
                count += 1
            }
            for try await _ in try await connection.query("DELETE FROM cap_counts WHERE at < \(before) RETURNING 1", logger: self.logger) {
                count += 1
            }
            return count
        }
    }

    public func started(_ run: JobRun) async throws(StoreError) {
        try await read { connection in
            try await connection.query("""
                INSERT INTO job_runs(app, job_id, idempotency_key, devices, chunks, started_at)
                VALUES (\(run.app), \(run.jobID), \(run.idempotencyKey), \(run.devices), \(run.chunks), \(run.startedAt)) ON CONFLICT DO NOTHING
                """, logger: self.logger)
        }
    }

    public func isCancelled(job: String, app: String) async throws(StoreError) -> Bool {
        try await read { connection in
            for try await cancelled in try await connection.query(
                "SELECT cancelled_at FROM job_runs WHERE app = \(app) AND job_id = \(job)", logger: self.logger).decode(Int64?.self) {
                return cancelled != nil
            }
            return false
        }
    }

    public func takeCap(_ cap: String, app: String, users: [String], job: String, max: Int, since: Int64, now: Int64) async throws(StoreError) -> Set<String> {
        let users = Set(users).sorted()
        guard !users.isEmpty else { return [] }
        var over: Set<String> = []
        try await transaction { connection in
            over = []
            // One lock per user and cap, taken in order (no deadlock): workers counting the same
            // user at once go one after the other, and each sees the other's count.
            try await connection.query("""
                SELECT pg_advisory_xact_lock(hashtextextended(\(app) || chr(1) || \(cap) || chr(1) || u, 7245313)) FROM UNNEST(\(users)::TEXT[]) AS u ORDER BY u
                """, logger: self.logger)
            for try await user in try await connection.query("""
                WITH wanted AS (SELECT u AS user_id FROM UNNEST(\(users)::TEXT[]) AS u),
                counted AS (SELECT user_id FROM cap_counts WHERE app = \(app) AND cap = \(cap) AND job_id = \(job) AND user_id = ANY(\(users))),
                recent AS (SELECT user_id, COUNT(*) AS n FROM cap_counts WHERE app = \(app) AND cap = \(cap) AND user_id = ANY(\(users)) AND at > \(since) GROUP BY user_id)
                SELECT w.user_id FROM wanted w LEFT JOIN recent r USING (user_id)
                WHERE w.user_id NOT IN (SELECT user_id FROM counted) AND COALESCE(r.n, 0) >= \(max)
                """, logger: self.logger).decode(String.self) {
                over.insert(user)
            }
            let take = users.filter { !over.contains($0) }
            try await connection.query("""
                INSERT INTO cap_counts(app, cap, user_id, job_id, at) SELECT \(app), \(cap), u, \(job), \(now) FROM UNNEST(\(take)::TEXT[]) AS u
                ON CONFLICT DO NOTHING
                """, logger: self.logger)
        }
        return over
    }

    /// A cancel for a job not held: its run, if it is sending, stops.
    private func stop(_ name: HeldJobName, at: Int64, on connection: PostgresConnection) async throws -> ScheduleCancellation {
        let columns = "app, job_id, idempotency_key, devices, chunks, started_at, cancelled_at"
        let rows: PostgresRowSequence = switch name.key {
        case .job(let id):
            try await connection.query("""
                SELECT \(unescaped: columns) FROM job_runs WHERE job_id = \(id) AND (\(name.app)::TEXT IS NULL OR app = \(name.app)) ORDER BY app FOR UPDATE
                """, logger: logger)
        case .idempotencyKey(let key):
            try await connection.query("""
                SELECT \(unescaped: columns) FROM job_runs WHERE idempotency_key = \(key) AND (\(name.app)::TEXT IS NULL OR app = \(name.app))
                ORDER BY started_at DESC, app LIMIT 1 FOR UPDATE
                """, logger: logger)
        }
        var found: [JobRun] = []
        for try await row in rows {
            let c = try row.decode((String, String, String?, Int, Int, Int64, Int64?).self)
            found.append(JobRun(jobID: c.1, app: c.0, idempotencyKey: c.2, devices: c.3, chunks: c.4, startedAt: c.5, cancelledAt: c.6))
        }
        guard var run = try JobRun.single(found, for: name) else { return .unknown }
        for try await count in try await connection.query(
            "SELECT COUNT(*) FROM deliveries WHERE job_id = \(run.jobID) AND app = \(run.app)", logger: logger).decode(Int.self) {
            run.finished = count
        }
        guard run.cancelledAt == nil, run.finished < run.devices else { return .finished(run) }
        try await connection.query("UPDATE job_runs SET cancelled_at = \(at) WHERE app = \(run.app) AND job_id = \(run.jobID)", logger: logger)
        run.cancelledAt = at
        return .stopped(run)
    }

    private func one(_ name: HeldJobName, on connection: PostgresConnection, locking: Bool) async throws -> HeldJob? {
        let lock = locking ? " FOR UPDATE" : ""
        let found: [HeldJob]
        switch name.key {
        case .job(let id):
            found = try await Self.jobs(connection.query("""
                SELECT \(unescaped: Self.scheduleColumns) FROM scheduled_jobs WHERE job_id = \(id) AND (\(name.app)::TEXT IS NULL OR app = \(name.app))
                ORDER BY app\(unescaped: lock)
                """, logger: logger))
        case .idempotencyKey(let key):
            found = try await Self.jobs(connection.query("""
                SELECT \(unescaped: Self.scheduleColumns) FROM scheduled_jobs WHERE idempotency_key = \(key) AND (\(name.app)::TEXT IS NULL OR app = \(name.app))
                ORDER BY held_at DESC, app LIMIT 1\(unescaped: lock)
                """, logger: logger))
        }
        return try HeldJobName.single(found, for: name)
    }

    static let scheduleColumns = "app, job_id, idempotency_key, release_at, body, reply_to, held_at, state, ended_at, releases, chunk"

    private static func jobs(_ rows: PostgresRowSequence) async throws -> [HeldJob] {
        var jobs: [HeldJob] = []
        for try await row in rows {
            let c = try row.decode((String, String, String?, Int64, String, String?, Int64, String, Int64?, Int, String?).self)
            jobs.append(HeldJob(
                jobID: c.1, app: c.0, idempotencyKey: c.2, releaseAt: c.3, body: c.4, replyTo: c.5, heldAt: c.6,
                state: HeldJob.State(rawValue: c.7) ?? .waiting, endedAt: c.8, releases: c.9, chunk: c.10))
        }
        return jobs
    }
}
