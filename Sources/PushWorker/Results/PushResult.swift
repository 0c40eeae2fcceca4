import APNs
import FCM
import Foundation
import Stores

/// One device's result, published to the reply queue with `type` = `result` and
/// `correlation_id` = the job id. Every key is always present (null when unknown), so consumers in
/// any language can rely on the shape. A broadcast's one result also has `channel` and
/// `request_id`, and its `token` is null: APNs alone knows the devices behind a channel. An
/// Android device's result also has `platform` (`fcm`) and `fcm_name`, FCM's message name.
public struct PushResult: Sendable, Hashable, Decodable {
    public var jobID: String
    /// Empty for a broadcast (null in the message).
    public var token: String
    /// A broadcast's channel id.
    public var channel: String?
    /// A broadcast's `apns-request-id`, as APNs answered it.
    public var requestID: String?
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
    /// `fcm` for an Android device's result; nil (no key) for APNs'.
    public var platform: DevicePlatform?
    /// FCM's name of the accepted message, `projects/<project>/messages/<id>`.
    public var fcmName: String?

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

    /// Takes in APNs' answer to an attempt (or why there is none), and returns the label metrics
    /// count it under: APNs' reason, or the kind of error (few values, unlike `reason`).
    /// Sends the client made again after a lost connection count as attempts: APNs may have
    /// delivered each of them.
    mutating func record(_ answer: Result<APNsResponse, APNsClientError>) -> String? {
        switch answer {
        case .success(let response):
            attempts += response.sends - 1
            status = response.status
            apnsID = response.apnsID
            apnsUniqueID = response.apnsUniqueID
            reason = response.reason?.rawValue
            timestamp = response.timestamp.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
            if channel != nil, let requestID = response.requestID { self.requestID = requestID }
            return response.reason?.rawValue
        case .failure(let error):
            status = nil
            reason = "\(error)"
            return error.kind
        }
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "job_id", token, user, app, outcome, status
        case apnsID = "apns_id", apnsUniqueID = "apns_unique_id"
        case reason, timestamp, attempts, channel
        case requestID = "request_id"
        case platform
        case fcmName = "fcm_name"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        jobID = try container.decode(String.self, forKey: .jobID)
        token = try container.decodeIfPresent(String.self, forKey: .token) ?? ""
        channel = try container.decodeIfPresent(String.self, forKey: .channel)
        requestID = try container.decodeIfPresent(String.self, forKey: .requestID)
        user = try container.decodeIfPresent(String.self, forKey: .user)
        app = try container.decode(String.self, forKey: .app)
        outcome = try container.decode(Outcome.self, forKey: .outcome)
        status = try container.decodeIfPresent(Int.self, forKey: .status)
        apnsID = try container.decodeIfPresent(String.self, forKey: .apnsID)
        apnsUniqueID = try container.decodeIfPresent(String.self, forKey: .apnsUniqueID)
        reason = try container.decodeIfPresent(String.self, forKey: .reason)
        timestamp = try container.decodeIfPresent(Int64.self, forKey: .timestamp)
        attempts = try container.decode(Int.self, forKey: .attempts)
        platform = try container.decodeIfPresent(DevicePlatform.self, forKey: .platform)
        fcmName = try container.decodeIfPresent(String.self, forKey: .fcmName)
    }

    /// The message body: every key, sorted, null when unknown. Spliced as bytes, like chunk
    /// bodies (`JSONText`): at one result per device, JSONEncoder was a visible share of the
    /// worker's CPU, and a generator call per key (YAJL) still cost more than the copying.
    public var json: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(192 + jobID.utf8.count + token.utf8.count + (reason?.utf8.count ?? 0) + (user?.utf8.count ?? 0))
        func string(_ text: String?) {
            if let text { JSONText.appendString(text, to: &bytes) } else { bytes += "null".utf8 }
        }
        func number<N: BinaryInteger>(_ value: N?) {
            if let value { bytes += String(value).utf8 } else { bytes += "null".utf8 }
        }
        bytes += #"{"apns_id":"#.utf8
        string(apnsID)
        bytes += #","apns_unique_id":"#.utf8
        string(apnsUniqueID)
        bytes += #","app":"#.utf8
        string(app)
        bytes += #","attempts":"#.utf8
        number(attempts)
        if let channel {
            bytes += #","channel":"#.utf8
            string(channel)
        }
        if platform == .fcm {
            bytes += #","fcm_name":"#.utf8
            string(fcmName)
        }
        bytes += #","job_id":"#.utf8
        string(jobID)
        bytes += #","outcome":"#.utf8
        string(outcome.rawValue)
        if let platform, platform != .apns {
            bytes += #","platform":"#.utf8
            string(platform.rawValue)
        }
        bytes += #","reason":"#.utf8
        string(reason)
        if channel != nil {
            bytes += #","request_id":"#.utf8
            string(requestID)
        }
        bytes += #","status":"#.utf8
        number(status)
        bytes += #","timestamp":"#.utf8
        number(timestamp)
        bytes += #","token":"#.utf8
        string(channel == nil ? token : nil)
        bytes += #","user":"#.utf8
        string(user)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}

extension PushResult {
    /// Takes in FCM's answer to an attempt, and returns the label metrics count it under (FCM's
    /// code, or `transport`).
    mutating func record(_ answer: FCMAnswer) -> String? {
        switch answer {
        case .accepted(let name):
            status = 200
            fcmName = name.isEmpty ? nil : name
            reason = nil
            return nil
        case .failed(let failure):
            status = failure.status
            reason = failure.reason
            return failure.reason
        case .unanswered(let why):
            status = nil
            reason = why
            return "transport"
        }
    }
}

extension PushResult {
    /// A result for `recipient` made without a send (filtered, withheld, cancelled…), its
    /// platform said for an Android device.
    init(of recipient: Recipient, jobID: String, app: String, outcome: Outcome, reason: String? = nil, attempts: Int) {
        self.init(jobID: jobID, token: recipient.token, user: recipient.user, app: app, outcome: outcome, reason: reason, attempts: attempts)
        if recipient.platform == .fcm { platform = .fcm }
    }
}
