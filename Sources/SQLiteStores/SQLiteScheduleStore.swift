import CSQLite
import Stores
import Synchronization

/// The schedule in an SQLite file (the ledger's), in WAL mode like the ledger, so the workers of
/// one host share it. A release takes its jobs in one `UPDATE … RETURNING`: two workers never
/// take the same job, and a worker that dies with jobs taken leaves them to the next after
/// their lease.
public final class SQLiteScheduleStore: ScheduleStore {
    private let state: Mutex<Connection>

    private final class Connection: @unchecked Sendable {
        let database: SQLiteDatabase
        let hold, due, release, cancel, list, byID, byKey, expire: SQLiteStatement
        let start, runByID, runByKey, stopRun, finishedCount, runCancelled, expireRuns: SQLiteStatement
        let capCounted, capCount, capTake, expireCaps: SQLiteStatement

        init(_ database: SQLiteDatabase) throws(StoreError) {
            self.database = database
            try database.execute("""
                CREATE TABLE IF NOT EXISTS scheduled_jobs(
                  app TEXT NOT NULL, job_id TEXT NOT NULL, idempotency_key TEXT, release_at INTEGER NOT NULL, body TEXT NOT NULL, reply_to TEXT,
                  held_at INTEGER NOT NULL, state TEXT NOT NULL, ended_at INTEGER, lease_until INTEGER, releases INTEGER NOT NULL DEFAULT 0,
                  chunk TEXT, PRIMARY KEY (app, job_id));
                CREATE INDEX IF NOT EXISTS scheduled_jobs_due ON scheduled_jobs(release_at) WHERE state = 'waiting';
                CREATE INDEX IF NOT EXISTS scheduled_jobs_key ON scheduled_jobs(idempotency_key) WHERE idempotency_key IS NOT NULL;
                CREATE TABLE IF NOT EXISTS job_runs(
                  app TEXT NOT NULL, job_id TEXT NOT NULL, idempotency_key TEXT, devices INTEGER NOT NULL, chunks INTEGER NOT NULL,
                  started_at INTEGER NOT NULL, cancelled_at INTEGER, PRIMARY KEY (app, job_id));
                CREATE INDEX IF NOT EXISTS job_runs_key ON job_runs(idempotency_key) WHERE idempotency_key IS NOT NULL;
                CREATE TABLE IF NOT EXISTS cap_counts(
                  app TEXT NOT NULL, cap TEXT NOT NULL, user_id TEXT NOT NULL, job_id TEXT NOT NULL, at INTEGER NOT NULL,
                  PRIMARY KEY (app, cap, user_id, job_id));
                CREATE INDEX IF NOT EXISTS cap_counts_at ON cap_counts(app, cap, user_id, at);
                CREATE INDEX IF NOT EXISTS cap_counts_expiry ON cap_counts(at);
                """)
            capCounted = try database.prepare("SELECT 1 FROM cap_counts WHERE app = ?1 AND cap = ?2 AND user_id = ?3 AND job_id = ?4")
            capCount = try database.prepare("SELECT COUNT(*) FROM cap_counts WHERE app = ?1 AND cap = ?2 AND user_id = ?3 AND at > ?4")
            capTake = try database.prepare("INSERT INTO cap_counts(app, cap, user_id, job_id, at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING")
            expireCaps = try database.prepare("DELETE FROM cap_counts WHERE at < ?1")
            let runColumns = "app, job_id, idempotency_key, devices, chunks, started_at, cancelled_at"
            start = try database.prepare("""
                INSERT INTO job_runs(app, job_id, idempotency_key, devices, chunks, started_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING
                """)
            runByID = try database.prepare("SELECT \(runColumns) FROM job_runs WHERE job_id = ?1 AND (?2 IS NULL OR app = ?2) ORDER BY app")
            runByKey = try database.prepare("SELECT \(runColumns) FROM job_runs WHERE idempotency_key = ?1 AND (?2 IS NULL OR app = ?2) ORDER BY started_at DESC, app")
            stopRun = try database.prepare("UPDATE job_runs SET cancelled_at = ?3 WHERE app = ?1 AND job_id = ?2 AND cancelled_at IS NULL")
            finishedCount = try database.prepare("SELECT COUNT(*) FROM deliveries WHERE job_id = ?2 AND app = ?1")
            runCancelled = try database.prepare("SELECT cancelled_at FROM job_runs WHERE app = ?1 AND job_id = ?2")
            expireRuns = try database.prepare("DELETE FROM job_runs WHERE started_at < ?1")
            let columns = "app, job_id, idempotency_key, release_at, body, reply_to, held_at, state, ended_at, releases, chunk"
            hold = try database.prepare("""
                INSERT INTO scheduled_jobs(app, job_id, idempotency_key, release_at, body, reply_to, held_at, state, chunk)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'waiting', ?8) ON CONFLICT DO NOTHING
                """)
            due = try database.prepare("""
                UPDATE scheduled_jobs SET lease_until = ?2, releases = releases + 1
                WHERE rowid IN (SELECT rowid FROM scheduled_jobs WHERE state = 'waiting' AND release_at <= ?1 AND (lease_until IS NULL OR lease_until < ?1)
                  ORDER BY release_at LIMIT ?3)
                RETURNING \(columns)
                """)
            release = try database.prepare("UPDATE scheduled_jobs SET state = 'released', ended_at = ?3, lease_until = NULL WHERE app = ?1 AND job_id = ?2 AND state = 'waiting'")
            cancel = try database.prepare("UPDATE scheduled_jobs SET state = 'cancelled', ended_at = ?3 WHERE app = ?1 AND job_id = ?2 AND state = 'waiting'")
            list = try database.prepare("""
                SELECT \(columns) FROM scheduled_jobs WHERE (?1 IS NULL OR app = ?1) AND (?2 IS NULL OR state = ?2) ORDER BY release_at, app, job_id LIMIT ?3
                """)
            byID = try database.prepare("SELECT \(columns) FROM scheduled_jobs WHERE job_id = ?1 AND (?2 IS NULL OR app = ?2) ORDER BY app")
            byKey = try database.prepare("SELECT \(columns) FROM scheduled_jobs WHERE idempotency_key = ?1 AND (?2 IS NULL OR app = ?2) ORDER BY held_at DESC, app")
            expire = try database.prepare("DELETE FROM scheduled_jobs WHERE state <> 'waiting' AND ended_at < ?1")
        }
    }

    /// Opens the ledger's file and makes the schedule's tables in it: a cancel reads the ledger
    /// to tell a job still sending from one finished.
    public init(ledger: SQLiteLedgerStore) throws(StoreError) {
        state = Mutex(try Connection(SQLiteDatabase(path: ledger.path, pageSize: SQLiteLedgerStore.pageSize)))
    }

    public func hold(_ job: HeldJob) async throws(StoreError) {
        try state.withLock { connection throws(StoreError) in
            try connection.hold.run([
                .text(job.app), .text(job.jobID), job.idempotencyKey.map { .text($0) } ?? .null, .integer(job.releaseAt), .text(job.body),
                job.replyTo.map { .text($0) } ?? .null, .integer(job.heldAt), job.chunk.map { .text($0) } ?? .null,
            ])
        }
    }

    public func due(now: Int64, leaseUntil: Int64, limit: Int) async throws(StoreError) -> [HeldJob] {
        try state.withLock { connection throws(StoreError) in
            var jobs: [HeldJob] = []
            try connection.due.run([.integer(now), .integer(leaseUntil), .integer(Int64(limit))]) { row in jobs.append(Self.job(row)) }
            return jobs.sorted { ($0.releaseAt, $0.app, $0.jobID) < ($1.releaseAt, $1.app, $1.jobID) }
        }
    }

    public func released(_ jobs: [HeldJob], at: Int64) async throws(StoreError) {
        try state.withLock { connection throws(StoreError) in
            try connection.database.transaction { () throws(StoreError) in
                for job in jobs { try connection.release.run([.text(job.app), .text(job.jobID), .integer(at)]) }
            }
        }
    }

    public func cancel(_ name: HeldJobName, at: Int64) async throws(StoreError) -> ScheduleCancellation {
        try state.withLock { connection throws(StoreError) -> ScheduleCancellation in
            try connection.database.transaction { () throws(StoreError) -> ScheduleCancellation in
                guard var job = try Self.one(name, connection) else { return try Self.stop(name, at: at, connection) }
                guard job.state == .waiting else { return .ended(job) }
                try connection.cancel.run([.text(job.app), .text(job.jobID), .integer(at)])
                job.state = .cancelled
                job.endedAt = at
                return .cancelled(job)
            }
        }
    }

    public func scheduled(app: String?, state wanted: HeldJob.State?, limit: Int) async throws(StoreError) -> [HeldJob] {
        try state.withLock { connection throws(StoreError) in
            var jobs: [HeldJob] = []
            try connection.list.run([app.map { .text($0) } ?? .null, wanted.map { .text($0.rawValue) } ?? .null, .integer(Int64(limit))]) { row in
                jobs.append(Self.job(row))
            }
            return jobs
        }
    }

    public func scheduledJob(_ name: HeldJobName) async throws(StoreError) -> HeldJob? {
        try state.withLock { connection throws(StoreError) in try Self.one(name, connection) }
    }

    public func expireSchedule(before: Int64) async throws(StoreError) -> Int {
        try state.withLock { connection throws(StoreError) in
            try connection.expire.run([.integer(before)])
            let jobs = connection.database.changes
            try connection.expireRuns.run([.integer(before)])
            let runs = connection.database.changes
            try connection.expireCaps.run([.integer(before)])
            return jobs + runs + connection.database.changes
        }
    }

    public func started(_ run: JobRun) async throws(StoreError) {
        try state.withLock { connection throws(StoreError) in
            try connection.start.run([
                .text(run.app), .text(run.jobID), run.idempotencyKey.map { .text($0) } ?? .null, .integer(Int64(run.devices)), .integer(Int64(run.chunks)),
                .integer(run.startedAt),
            ])
        }
    }

    public func isCancelled(job: String, app: String) async throws(StoreError) -> Bool {
        try state.withLock { connection throws(StoreError) in
            var cancelled = false
            try connection.runCancelled.run([.text(app), .text(job)]) { row in cancelled = row.text(0) != nil }
            return cancelled
        }
    }

    public func takeCap(_ cap: String, app: String, users: [String], job: String, max: Int, since: Int64, now: Int64) async throws(StoreError) -> Set<String> {
        guard !users.isEmpty else { return [] }
        // One write transaction: the file's lock takes workers of this host one after the other.
        return try state.withLock { connection throws(StoreError) -> Set<String> in
            try connection.database.transaction { () throws(StoreError) -> Set<String> in
                var over: Set<String> = []
                for user in Set(users) {
                    var counted = false
                    try connection.capCounted.run([.text(app), .text(cap), .text(user), .text(job)]) { _ in counted = true }
                    if counted { continue }
                    var count = 0
                    try connection.capCount.run([.text(app), .text(cap), .text(user), .integer(since)]) { row in count = Int(row.integer(0)) }
                    if count >= max {
                        over.insert(user)
                    } else {
                        try connection.capTake.run([.text(app), .text(cap), .text(user), .text(job), .integer(now)])
                    }
                }
                return over
            }
        }
    }

    /// A cancel for a job not held: its run, if it is sending, stops.
    private static func stop(_ name: HeldJobName, at: Int64, _ connection: Connection) throws(StoreError) -> ScheduleCancellation {
        var found: [JobRun] = []
        let app: SQLiteStatement.Value = name.app.map { .text($0) } ?? .null
        switch name.key {
        case .job(let id): try connection.runByID.run([.text(id), app]) { row in found.append(run(row)) }
        case .idempotencyKey(let key):
            try connection.runByKey.run([.text(key), app]) { row in found.append(run(row)) }
            found = Array(found.prefix(1))
        }
        guard var run = try JobRun.single(found, for: name) else { return .unknown }
        try connection.finishedCount.run([.text(run.app), .text(run.jobID)]) { row in run.finished = Int(row.integer(0)) }
        guard run.cancelledAt == nil, run.finished < run.devices else { return .finished(run) }
        try connection.stopRun.run([.text(run.app), .text(run.jobID), .integer(at)])
        run.cancelledAt = at
        return .stopped(run)
    }

    private static func run(_ row: SQLiteStatement.Row) -> JobRun {
        JobRun(
            jobID: row.text(1) ?? "", app: row.text(0) ?? "", idempotencyKey: row.text(2), devices: Int(row.integer(3)), chunks: Int(row.integer(4)),
            startedAt: row.integer(5), cancelledAt: row.text(6) == nil ? nil : row.integer(6))
    }

    /// The job a name means; a name several apps' jobs answer to is refused: the app decides.
    private static func one(_ name: HeldJobName, _ connection: Connection) throws(StoreError) -> HeldJob? {
        var found: [HeldJob] = []
        let app: SQLiteStatement.Value = name.app.map { .text($0) } ?? .null
        switch name.key {
        case .job(let id): try connection.byID.run([.text(id), app]) { row in found.append(job(row)) }
        case .idempotencyKey(let key):
            // A key taken again after its window names a newer job: the newest is meant.
            try connection.byKey.run([.text(key), app]) { row in found.append(job(row)) }
            found = Array(found.prefix(1))
        }
        return try HeldJobName.single(found, for: name)
    }

    private static func job(_ row: SQLiteStatement.Row) -> HeldJob {
        HeldJob(
            jobID: row.text(1) ?? "", app: row.text(0) ?? "", idempotencyKey: row.text(2), releaseAt: row.integer(3), body: row.text(4) ?? "",
            replyTo: row.text(5), heldAt: row.integer(6), state: HeldJob.State(rawValue: row.text(7) ?? "") ?? .waiting,
            endedAt: row.text(8) == nil ? nil : row.integer(8), releases: Int(row.integer(9)), chunk: row.text(10))
    }
}
