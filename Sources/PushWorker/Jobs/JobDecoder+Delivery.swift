import APNs
import Foundation
import Stores

/// The job's delivery options: the headers APNs reads (`push_type`, `priority`, `expiration`,
/// `collapse_id`, `topic`) and where its results go (`results`, `reply_to`); a Live Activity's
/// rules for them.
extension JobDecoder {
    /// As the job names them, then as the decoder settles them.
    struct DeliveryOptions {
        /// nil: the payload's kind decides (`decodePayload`).
        var pushType: APNsPushType?
        var priority: APNsPriority?
        var expiration: APNsExpiration?
        var collapseID: String?
        var topic: String?
        var results = PushJob.ResultsMode.all
        var replyTo: String?
    }

    func decodeHeaders(_ fields: inout JobFields) throws(JobError) -> DeliveryOptions {
        var delivery = DeliveryOptions()
        if let text = try fields.string("push_type") {
            do { delivery.pushType = try APNsPushType(validating: text) } catch { throw JobError(.invalidField, field: "push_type", "push_type: \(error.message)") }
        }
        if let value = try fields.integer("priority") {
            do { delivery.priority = try APNsPriority(validating: value) } catch { throw JobError(.invalidField, field: "priority", "priority: \(error.message)") }
        }
        return delivery
    }

    /// A Live Activity push, and a broadcast, go as push type `liveactivity`, at a priority APNs
    /// accepts for them.
    static func applyLiveActivityRules(_ liveActivity: LiveActivity?, audience: PushJob.Audience, to delivery: inout DeliveryOptions) throws(JobError) {
        guard liveActivity != nil || audience.channel != nil else { return }
        if let named = delivery.pushType, named != .liveactivity {
            let cause = liveActivity != nil ? "a job with live_activity" : "a broadcast (audience.channel)"
            throw JobError(.invalidField, field: "push_type", "push_type is \(named.rawValue), but \(cause) is sent as liveactivity (leave push_type out)")
        }
        delivery.pushType = .liveactivity
        if let priority = delivery.priority, priority == .low {
            throw JobError(.invalidField, field: "priority", "priority 1 is not one APNs accepts for Live Activities; use 5 (routine) or 10 (the user is waiting)")
        }
        delivery.priority = delivery.priority ?? liveActivity?.defaultPriority
    }

    func decodeRouting(
        _ fields: inout JobFields, _ object: [String: Any], into delivery: inout DeliveryOptions, app: String, appTopic: String,
        audience: PushJob.Audience, liveActivity: LiveActivity?, enqueuedAt: Date
    ) throws(JobError) {
        delivery.expiration = try decodeExpiration(object["expiration"], enqueuedAt: enqueuedAt)
            ?? defaultExpirations[app]?.expiration(since: enqueuedAt)
        delivery.collapseID = try fields.string("collapse_id")
        delivery.topic = try fields.string("topic")
        if delivery.pushType == .liveactivity, delivery.topic == nil, liveActivity != nil || audience.channel != nil,
            let suffix = APNsPushType.liveactivity.requiredTopicSuffix, !appTopic.hasSuffix(suffix)
        {
            // Written out, so chunk and retry jobs carry the topic the decoder chose.
            delivery.topic = appTopic + suffix
        }
        if audience.channel != nil, delivery.collapseID != nil {
            throw JobError(.invalidField, field: "collapse_id", "collapse_id does not apply to a broadcast: APNs takes none on a channel")
        }
        delivery.results = defaultResults[app] ?? .all
        if let text = try fields.string("results") {
            guard let mode = PushJob.ResultsMode(rawValue: text) else {
                throw JobError(.invalidField, field: "results", "results '\(text)' is not all, batched, failures or none")
            }
            delivery.results = mode
        }
        let replyTo = try fields.string("reply_to")
        if let replyTo, replyTo.isEmpty { throw JobError(.invalidField, field: "reply_to", "reply_to is empty") }
        if let replyTo, replyTo.utf8.count > 255 {
            throw JobError(.invalidField, field: "reply_to", "reply_to is \(replyTo.utf8.count) bytes; AMQP queue names have at most 255")
        }
        delivery.replyTo = replyTo
    }

    /// `"immediate"` or 0, Unix seconds, an RFC 3339 string, or `{"after_seconds": N}`.
    func decodeExpiration(_ value: Any?, enqueuedAt: Date) throws(JobError) -> APNsExpiration? {
        guard let value else { return nil }
        let field = "expiration"
        if let text = value as? String {
            if text == "immediate" { return .immediately }
            if let milliseconds = RFC3339.milliseconds(json: text) { return .at(Date(timeIntervalSince1970: Double(milliseconds) / 1000)) }
            throw JobError(.invalidField, field: field, "expiration '\(text)' is not \"immediate\" or an RFC 3339 time")
        }
        if let number = JSONValue.number(value), !JSONValue.isBoolean(number) {
            guard let milliseconds = RFC3339.milliseconds(json: number) else {
                throw JobError(.invalidField, field: field, "expiration \(number) is not a Unix time in whole seconds")
            }
            // 0 is what APNs' own header means by "immediately", never a moment in 1970.
            return milliseconds == 0 ? .immediately : .at(Date(timeIntervalSince1970: Double(milliseconds) / 1000))
        }
        if let object = value as? [String: Any] {
            guard object.count == 1, let raw = object["after_seconds"] else {
                throw JobError(.invalidField, field: field, "expiration object must be {\"after_seconds\": N}")
            }
            guard let number = JSONValue.number(raw), !JSONValue.isBoolean(number), number.doubleValue.isFinite,
                number.doubleValue >= 0, number.doubleValue <= 31_536_000, number.doubleValue == number.doubleValue.rounded()
            else {
                throw JobError(.invalidField, field: "expiration.after_seconds", "expiration.after_seconds must be whole seconds between 0 and 31536000")
            }
            return .after(.seconds(number.int64Value), since: enqueuedAt)
        }
        throw JobError(.invalidField, field: field, "expiration must be \"immediate\", Unix seconds, an RFC 3339 time or {\"after_seconds\": N}")
    }
}
