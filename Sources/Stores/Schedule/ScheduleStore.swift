/// Where jobs with a `send_at` wait: in the same store as the delivery ledger (the registry's
/// SQLite file or PostgreSQL, or the ledger's own file), so every worker of the fleet sees them
/// and any of them releases them. One conformance suite runs on both stores.
public protocol ScheduleStore: Sendable {
    /// Holds a job. The same job (app, id) held again — its message delivered twice — stays as
    /// first held.
    func hold(_ job: HeldJob) async throws(StoreError)
    /// Takes the waiting jobs due at `now`, at most `limit`, earliest first, for this worker to
    /// release until `leaseUntil`: a job whose worker died mid-release is taken again once that
    /// time passes. Two workers asking at once never take the same job.
    func due(now: Int64, leaseUntil: Int64, limit: Int) async throws(StoreError) -> [HeldJob]
    /// Marks jobs released (their messages are confirmed on the due queue).
    func released(_ jobs: [HeldJob], at: Int64) async throws(StoreError)
    /// Cancels a waiting job, or the chunks not yet sent of a job sending, named by its id or its
    /// idempotency key (within `app` when named); a job held in the schedule is looked for first.
    /// Throws `invalidField` (`app`) when the name matches jobs of several apps.
    func cancel(_ name: HeldJobName, at: Int64) async throws(StoreError) -> ScheduleCancellation
    /// Held jobs, soonest first; only those in `state` when named.
    func scheduled(app: String?, state: HeldJob.State?, limit: Int) async throws(StoreError) -> [HeldJob]
    /// One job by name, whatever its state.
    func scheduledJob(_ name: HeldJobName) async throws(StoreError) -> HeldJob?
    /// Forgets released and cancelled jobs that ended before `before`, and runs started before
    /// it, with the ledger's retention.
    func expireSchedule(before: Int64) async throws(StoreError) -> Int
    /// A job split into chunk jobs: from now on a cancel can stop its chunks. Kept as first
    /// started when the same job is split again (redelivered).
    func started(_ run: JobRun) async throws(StoreError)
    /// Whether the run of this job was cancelled: its chunks send nothing more.
    func isCancelled(job: String, app: String) async throws(StoreError) -> Bool
    /// Counts `job` against frequency cap `cap` of `app` for each of `users` who had fewer than
    /// `max` jobs counted since `since`, and returns the others: over the cap, not counted. A
    /// user this job was counted for already (a chunk again) is not over. Workers counting the
    /// same user at once are taken one after the other: the cap holds fleet-wide.
    func takeCap(_ cap: String, app: String, users: [String], job: String, max: Int, since: Int64, now: Int64) async throws(StoreError) -> Set<String>
}

/// How a cancel or a `schedule show` names a job.
public struct HeldJobName: Sendable, Hashable {
    public enum Key: Sendable, Hashable {
        case job(String)
        case idempotencyKey(String)
    }

    public var key: Key
    /// The app, when named: a job id or key is unique per app.
    public var app: String?

    public init(_ key: Key, app: String? = nil) {
        self.key = key
        self.app = app
    }

    public var description: String {
        let name = switch key {
        case .job(let id): "job '\(id)'"
        case .idempotencyKey(let key): "idempotency_key '\(key)'"
        }
        return app.map { "\(name) of app '\($0)'" } ?? name
    }
}

/// What a cancel found.
public enum ScheduleCancellation: Sendable, Hashable {
    /// It was waiting, and is cancelled now: it will never be released.
    case cancelled(HeldJob)
    /// Too late: released (or cancelled) before.
    case ended(HeldJob)
    /// It was sending (split into chunks) and is cancelled now: its devices not yet sent get
    /// outcome `cancelled`.
    case stopped(JobRun)
    /// Its run was cancelled before, or every device has its result already.
    case finished(JobRun)
    /// No job is held by that name.
    case unknown
}

extension HeldJobName {
    /// The one job found, nil for none; several (one id in two apps) need the app named.
    public static func single(_ found: [HeldJob], for name: HeldJobName) throws(StoreError) -> HeldJob? {
        guard found.count > 1 else { return found.first }
        throw StoreError(.invalidField, field: "app",
            "\(name.description) is held for several apps (\(found.map(\.app).joined(separator: ", "))): name the app")
    }
}

extension JobRun {
    /// The one run found, nil for none; several (one id in two apps) need the app named.
    public static func single(_ found: [JobRun], for name: HeldJobName) throws(StoreError) -> JobRun? {
        guard found.count > 1 else { return found.first }
        throw StoreError(.invalidField, field: "app",
            "\(name.description) is sending for several apps (\(found.map(\.app).joined(separator: ", "))): name the app")
    }
}
