import Foundation

/// One device's result, published to the reply queue with `type` = `result` and
/// `correlation_id` = the job id. Every key is always present (null when unknown), so consumers in
/// any language can rely on the shape.
public struct PushResult: Sendable, Hashable, Encodable {
    public var jobID: String
    public var token: String
    public var user: String?
    public var app: String
    public var outcome: Outcome
    public var status: Int?
    public var apnsID: String?
    public var apnsUniqueID: String?
    public var reason: String?
    /// For 410: when APNs last saw the token valid, milliseconds since 1970, as APNs gives it.
    public var timestamp: Int64?
    public var attempts: Int

    public init(
        jobID: String, token: String, user: String? = nil, app: String, outcome: Outcome, status: Int? = nil,
        apnsID: String? = nil, apnsUniqueID: String? = nil, reason: String? = nil, timestamp: Int64? = nil, attempts: Int
    ) {
        self.jobID = jobID
        self.token = token
        self.user = user
        self.app = app
        self.outcome = outcome
        self.status = status
        self.apnsID = apnsID
        self.apnsUniqueID = apnsUniqueID
        self.reason = reason
        self.timestamp = timestamp
        self.attempts = attempts
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "job_id", token, user, app, outcome, status
        case apnsID = "apns_id", apnsUniqueID = "apns_unique_id", reason, timestamp, attempts
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(jobID, forKey: .jobID)
        try container.encode(token, forKey: .token)
        try container.encode(user, forKey: .user)
        try container.encode(app, forKey: .app)
        try container.encode(outcome, forKey: .outcome)
        try container.encode(status, forKey: .status)
        try container.encode(apnsID, forKey: .apnsID)
        try container.encode(apnsUniqueID, forKey: .apnsUniqueID)
        try container.encode(reason, forKey: .reason)
        try container.encode(timestamp, forKey: .timestamp)
        try container.encode(attempts, forKey: .attempts)
    }
}
