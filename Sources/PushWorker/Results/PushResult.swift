import Foundation
import JSONStream

/// One device's result, published to the reply queue with `type` = `result` and
/// `correlation_id` = the job id. Every key is always present (null when unknown), so consumers in
/// any language can rely on the shape.
public struct PushResult: Sendable, Hashable, Decodable {
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
        case apnsID = "apns_id", apnsUniqueID = "apns_unique_id"
        case reason, timestamp, attempts
    }

    /// The message body: every key, sorted, null when unknown. Written with YAJL's generator:
    /// at one result per device, JSONEncoder was a visible share of the worker's CPU.
    public var json: [UInt8] {
        let writer = JSONStreamWriter()
        func field(_ key: String, _ value: JSONEvent) {
            try! writer.write(.key(key))  // keys and scalars inside an object are always valid
            try! writer.write(value)
        }
        func string(_ text: String?) -> JSONEvent { text.map(JSONEvent.string) ?? .null }
        func number<N: BinaryInteger>(_ value: N?) -> JSONEvent { value.map { .number(String($0)) } ?? .null }
        try! writer.write(.startObject)
        field("apns_id", string(apnsID))
        field("apns_unique_id", string(apnsUniqueID))
        field("app", .string(app))
        field("attempts", number(attempts))
        field("job_id", .string(jobID))
        field("outcome", .string(outcome.rawValue))
        field("reason", string(reason))
        field("status", number(status))
        field("timestamp", number(timestamp))
        field("token", .string(token))
        field("user", string(user))
        try! writer.write(.endObject)
        return writer.bytes
    }
}
