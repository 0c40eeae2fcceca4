/// A large job being sent as chunk jobs: kept from its split on so that `cancel_job` can stop
/// the chunks not yet sent, and can tell a job still sending from one finished (every device has
/// its record in the ledger).
public struct JobRun: Sendable, Hashable {
    public var jobID: String
    public var app: String
    public var idempotencyKey: String?
    /// Devices in its chunks.
    public var devices: Int
    public var chunks: Int
    public var startedAt: Int64
    public var cancelledAt: Int64?
    /// Devices with a record in the ledger when it was read (a cancel's answer).
    public var finished: Int

    public init(
        jobID: String, app: String, idempotencyKey: String? = nil, devices: Int, chunks: Int, startedAt: Int64, cancelledAt: Int64? = nil,
        finished: Int = 0
    ) {
        self.jobID = jobID
        self.app = app
        self.idempotencyKey = idempotencyKey
        self.devices = devices
        self.chunks = chunks
        self.startedAt = startedAt
        self.cancelledAt = cancelledAt
        self.finished = finished
    }

    public var json: [String: Any] {
        var object: [String: Any] = [
            "job_id": jobID, "app": app, "state": cancelledAt == nil ? (finished >= devices ? "finished" : "sending") : "cancelled", "devices": devices,
            "chunks": chunks, "started_at": startedAt, "devices_finished": finished,
        ]
        if let idempotencyKey { object["idempotency_key"] = idempotencyKey }
        if let cancelledAt { object["cancelled_at"] = cancelledAt }
        return object
    }
}
