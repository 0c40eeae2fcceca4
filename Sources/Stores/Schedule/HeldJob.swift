/// A job held until its `send_at`: its body as the producer sent it, which a worker publishes
/// again to the due queue (`push.jobs.due`) at its time. Held in the store, not in a worker's memory or as a
/// message's TTL, so it is released on time whichever workers are running then.
public struct HeldJob: Sendable, Hashable {
    public enum State: String, Sendable {
        /// Held: released at `releaseAt`.
        case waiting
        /// Published to the due queue (confirmed) at `releasedAt`.
        case released
        /// Cancelled before its release, at `cancelledAt`.
        case cancelled
    }

    public var jobID: String
    public var app: String
    public var idempotencyKey: String?
    /// Milliseconds since 1970.
    public var releaseAt: Int64
    /// The job's JSON as it came (UTF-8).
    public var body: String
    /// The AMQP `reply_to` it came with, kept for its release.
    public var replyTo: String?
    public var heldAt: Int64
    public var state: State
    /// When it was released or cancelled.
    public var endedAt: Int64?
    /// How many times a worker took it to release it (more than 1: a worker died mid-release, and
    /// the job may reach the queue twice; its devices are then checked against the ledger).
    public var releases: Int
    /// For a part of a job held back (devices in their quiet hours): released as a chunk job of
    /// this label, its devices resolved; nil for a job as its producer sent it.
    public var chunk: String?

    public init(
        jobID: String, app: String, idempotencyKey: String? = nil, releaseAt: Int64, body: String, replyTo: String? = nil, heldAt: Int64,
        state: State = .waiting, endedAt: Int64? = nil, releases: Int = 0, chunk: String? = nil
    ) {
        self.chunk = chunk
        self.jobID = jobID
        self.app = app
        self.idempotencyKey = idempotencyKey
        self.releaseAt = releaseAt
        self.body = body
        self.replyTo = replyTo
        self.heldAt = heldAt
        self.state = state
        self.endedAt = endedAt
        self.releases = releases
    }

    /// As `schedule list --json`, `schedule show` and `cancel_job`'s answer show it (the body apart).
    public var json: [String: Any] {
        var object: [String: Any] = [
            "job_id": jobID, "app": app, "send_at": releaseAt, "held_at": heldAt, "state": state.rawValue, "releases": releases,
        ]
        if let idempotencyKey { object["idempotency_key"] = idempotencyKey }
        if let chunk { object["chunk"] = chunk }
        if let endedAt { object[state == .cancelled ? "cancelled_at" : "released_at"] = endedAt }
        return object
    }
}
