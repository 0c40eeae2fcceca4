/// The final word on one device of a job.
public enum Outcome: String, Sendable, Hashable, CaseIterable, Codable {
    /// APNs answered 200.
    case delivered
    /// APNs answered a final 4xx; `reason` says why (and `timestamp` for 410).
    case rejected
    /// Retries ran out on 429, 5xx, timeouts or transport errors.
    case failed
    /// The user's preferences exclude the job; no request was made.
    case filtered
    /// The job's expiration passed before the device was reached.
    case expired
    /// The job was cancelled (`cancel_job`) before the device was sent; no request was made.
    case cancelled

    /// Whether a job with `results: failures` reports it.
    public var isFailure: Bool { self != .delivered }
}
