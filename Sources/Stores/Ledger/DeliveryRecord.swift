import Foundation

/// One device's final result for one job, as the ledger keeps it: what the reply queue was told,
/// with the chunk it came from and when. A broadcast's record has an empty token and names its
/// channel and APNs' request id. A job's device has one record: a job or chunk that comes back
/// after a fault finds it and neither sends nor publishes it again.
public struct DeliveryRecord: Sendable, Hashable, Codable {
    public var jobID: String
    public var chunk: String?
    public var app: String
    /// Empty for a broadcast.
    public var token: String
    public var user: String?
    /// `delivered`, `rejected`, `failed`, `filtered` or `expired`.
    public var outcome: String
    public var status: Int?
    public var reason: String?
    public var apnsID: String?
    /// An Android device's message name (`projects/…/messages/…`). The stores keep it where they
    /// keep `apnsID` (`serviceMessageID`): the token tells which it is.
    public var fcmName: String?
    public var apnsUniqueID: String?
    public var attempts: Int
    /// When the result was final, milliseconds since 1970.
    public var at: Int64
    public var channel: String?
    public var requestID: String?
    /// For 410: when APNs last saw the token valid, milliseconds since 1970, as APNs gave it.
    public var timestamp: Int64?
    /// The `results: batched` message the result was packed in, while the ledger cannot say the
    /// broker confirmed that message: a job that comes back publishes such a result again, from
    /// this record, without a push. Nil when the result was confirmed before its record was
    /// written (`all`, `failures`), when there was none to publish, and, as `finals` reads it back,
    /// once its message is marked confirmed.
    public var resultsMessage: Int64?

    public init(
        jobID: String, chunk: String? = nil, app: String, token: String, user: String? = nil, outcome: String, status: Int? = nil,
        reason: String? = nil, apnsID: String? = nil, apnsUniqueID: String? = nil, attempts: Int, at: Int64, channel: String? = nil,
        requestID: String? = nil, timestamp: Int64? = nil, resultsMessage: Int64? = nil, fcmName: String? = nil
    ) {
        self.jobID = jobID
        self.chunk = chunk
        self.app = app
        self.token = token
        self.user = user
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.fcmName = fcmName
        self.apnsUniqueID = apnsUniqueID
        self.attempts = attempts
        self.at = at
        self.channel = channel
        self.requestID = requestID
        self.timestamp = timestamp
        self.resultsMessage = resultsMessage
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "job_id", chunk, app, token, user, platform, outcome, status, reason, apnsID = "apns_id", fcmName = "fcm_name",
            apnsUniqueID = "apns_unique_id", attempts, at, channel, requestID = "request_id", timestamp, resultsMessage = "results_message"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            jobID: try c.decode(String.self, forKey: .jobID), chunk: try c.decodeIfPresent(String.self, forKey: .chunk), app: try c.decode(String.self, forKey: .app),
            token: try c.decodeIfPresent(String.self, forKey: .token) ?? "", user: try c.decodeIfPresent(String.self, forKey: .user),
            outcome: try c.decode(String.self, forKey: .outcome), status: try c.decodeIfPresent(Int.self, forKey: .status),
            reason: try c.decodeIfPresent(String.self, forKey: .reason), apnsID: try c.decodeIfPresent(String.self, forKey: .apnsID),
            apnsUniqueID: try c.decodeIfPresent(String.self, forKey: .apnsUniqueID), attempts: try c.decode(Int.self, forKey: .attempts),
            at: try c.decode(Int64.self, forKey: .at), channel: try c.decodeIfPresent(String.self, forKey: .channel),
            requestID: try c.decodeIfPresent(String.self, forKey: .requestID), timestamp: try c.decodeIfPresent(Int64.self, forKey: .timestamp),
            resultsMessage: try c.decodeIfPresent(Int64.self, forKey: .resultsMessage), fcmName: try c.decodeIfPresent(String.self, forKey: .fcmName))
    }

    /// Every key but `results_message` (the ledger's own bookkeeping), with `platform` as the
    /// token tells it; an absent value is left out.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(jobID, forKey: .jobID)
        try c.encodeIfPresent(chunk, forKey: .chunk)
        try c.encode(app, forKey: .app)
        try c.encode(token, forKey: .token)
        try c.encodeIfPresent(user, forKey: .user)
        if !token.isEmpty { try c.encode(platform, forKey: .platform) }
        try c.encode(outcome, forKey: .outcome)
        try c.encodeIfPresent(status, forKey: .status)
        try c.encodeIfPresent(reason, forKey: .reason)
        try c.encodeIfPresent(apnsID, forKey: .apnsID)
        try c.encodeIfPresent(fcmName, forKey: .fcmName)
        try c.encodeIfPresent(apnsUniqueID, forKey: .apnsUniqueID)
        try c.encode(attempts, forKey: .attempts)
        try c.encode(at, forKey: .at)
        try c.encodeIfPresent(channel, forKey: .channel)
        try c.encodeIfPresent(requestID, forKey: .requestID)
        try c.encodeIfPresent(timestamp, forKey: .timestamp)
    }

    /// The service the device was reached through. Each service's tokens have a form of their
    /// own, checked when a job or the registry takes them, so the token tells it.
    public var platform: DevicePlatform { DevicePlatform(ofToken: token) }

    /// The service's id of the message, as the stores keep it in one column: APNs' `apns-id` or
    /// FCM's message name.
    public var serviceMessageID: String? {
        get { apnsID ?? fcmName }
        set {
            if platform == .fcm { (apnsID, fcmName) = (nil, newValue) } else { (apnsID, fcmName) = (newValue, nil) }
        }
    }

    /// The record as a reply's JSON object: every key present, null when unknown; `at` in
    /// milliseconds since 1970.
    public var json: [String: Any] {
        func value(_ optional: Any?) -> Any { optional ?? NSNull() }
        return [
            "job_id": jobID, "chunk": value(chunk), "app": app, "token": token.isEmpty ? NSNull() : token, "user": value(user), "outcome": outcome,
            "platform": token.isEmpty ? NSNull() : platform.rawValue,
            "status": value(status), "reason": value(reason), "apns_id": value(apnsID), "fcm_name": value(fcmName), "apns_unique_id": value(apnsUniqueID), "attempts": attempts,
            "at": at, "channel": value(channel), "request_id": value(requestID), "timestamp": value(timestamp),
        ]
    }

    /// A time as the ledger keeps it: milliseconds since 1970, rounded.
    public static func milliseconds(_ date: Date = Date()) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// The day a record belongs to (UTC), which retention drops whole.
    public static func day(ofMilliseconds at: Int64) -> Int64 { at / 86_400_000 }
}
