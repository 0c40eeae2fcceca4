import APNs
import Foundation

/// The job's `payload` section: what each device is sent (built from `live_activity` for a Live
/// Activity), its push type when the job names none, a counted badge, and the rules APNs checks,
/// checked once for the whole job.
extension JobDecoder {
    struct DecodedPayload {
        /// A function of the job's body alone, so the same job makes the same bytes in every worker
        /// and every chunk: the producer's text of `payload` without its whitespace, or, for a
        /// payload the worker builds or changes, the tree written with its keys sorted.
        var bytes: [UInt8]
        var pushType: APNsPushType
        var badge: BadgeIncrement?
        /// No payload was named, and the job reaches Android devices alone (`PushJob.androidOnlyPayload`).
        var androidOnly = false
    }

    func decodePayload(
        _ fields: inout JobFields, _ object: [String: Any], body: [UInt8], liveActivity: LiveActivity?, delivery: DeliveryOptions, app: String, appTopic: String,
        audience: PushJob.Audience
    ) throws(JobError) -> DecodedPayload {
        var payloadDictionary: [String: Any]
        var androidOnly = false
        if let liveActivity {
            // The app's own keys may ride along; `aps` is the worker's to build.
            payloadDictionary = try fields.object("payload") ?? [:]
            if payloadDictionary["aps"] != nil {
                throw JobError(.invalidField, field: "payload.aps",
                    "payload.aps is built from live_activity; move its fields there (payload may carry the app's own keys only)")
            }
            payloadDictionary["aps"] = liveActivity.aps
        } else {
            // A job without a payload: APNs' alert is made from its `notification`; one for Android
            // devices alone needs none (APNs is not asked).
            let onlyAndroid = !audience.fcmTokens.isEmpty && audience.tokens.isEmpty && audience.users.isEmpty && audience.groups.isEmpty
                && audience.activity == nil && audience.channel == nil
            guard let payloadObject = object["payload"] ?? Self.alertPayload(from: object["notification"]) ?? (onlyAndroid ? ["aps": [:]] as [String: Any] : nil) else {
                throw JobError(.missingField, field: "payload", "payload is missing")
            }
            androidOnly = object["payload"] == nil && Self.alertPayload(from: object["notification"]) == nil
            guard let dictionary = payloadObject as? [String: Any] else {
                throw JobError(.invalidField, field: "payload", "payload must be a JSON object, such as {\"aps\": {\"alert\": \"…\"}}")
            }
            payloadDictionary = dictionary
        }
        let inferred = delivery.pushType == nil
        let pushType = delivery.pushType ?? PayloadRules.inferredPushType(payloadDictionary)
        try PayloadRules.check(payloadDictionary, pushType: pushType, inferred: inferred)
        if inferred && pushType == .background && delivery.priority == .immediate {
            throw JobError(.invalidField, field: "priority",
                "priority 10 with a payload that only asks for content-available: such a job is sent as push_type background, which APNs refuses at 10; use priority 5, or add an alert and push_type alert")
        }
        // A counted badge is serialised as a placeholder number, replaced per device.
        var serialised = payloadDictionary
        let badgeAmount = try (payloadDictionary["aps"] as? [String: Any]).flatMap { aps throws(JobError) in try BadgeIncrement.read(aps) }
        if badgeAmount != nil, var aps = serialised["aps"] as? [String: Any] {
            aps["badge"] = BadgeIncrement.placeholder
            serialised["aps"] = aps
        }
        // Sent as the producer wrote it unless the worker changed it, or its escapes (`\u00e9`,
        // `\/`) take it over APNs' limit where the tree, written again, fits.
        let limit = audience.channel == nil ? pushType.payloadLimit : APNsRequest.broadcastPayloadLimit
        let asWritten = liveActivity == nil && badgeAmount == nil && object["payload"] != nil
            ? JSONMemberText.value(of: "payload", in: body).flatMap { $0.count <= limit ? $0 : nil } : nil
        guard let payload = asWritten ?? JSONDocument.bytes(serialised) else {
            throw JobError(.invalidField, field: "payload", "payload cannot be serialised")
        }
        if badgeAmount != nil && pushType == .liveactivity {
            // A broadcast has no devices to count for, and ActivityKit shows no badge.
            throw JobError(.invalidPayload, field: "payload.aps.badge", "payload.aps.badge cannot be counted for a Live Activity push")
        }
        var badge: BadgeIncrement?
        if let badgeAmount {
            guard let counted = BadgeIncrement(amount: badgeAmount, payload: payload) else {
                // Another `"badge":` key holding the placeholder's digits: never send a wrong number.
                throw JobError(.invalidPayload, field: "payload.aps.badge", "payload.aps.badge cannot be counted in this payload: another \"badge\" key holds \(BadgeIncrement.placeholder)")
            }
            badge = counted
        }
        // The rules a request is sent under, checked once for the whole job with the very code
        // the client checks each request with.
        let notification = APNsRequest(
            deviceToken: "", topic: delivery.topic ?? appTopic, pushType: pushType, priority: delivery.priority, expiration: delivery.expiration,
            collapseID: delivery.collapseID, payload: payload, channelID: audience.channel)
        do {
            try notification.validateNotification()
        } catch {
            if error.field == "payload" && payload.count > (audience.channel == nil ? pushType.payloadLimit : APNsRequest.broadcastPayloadLimit) {
                throw JobError(.payloadTooLarge, field: "payload", error.message)
            }
            if error.field == "topic" && delivery.topic == nil, let suffix = pushType.requiredTopicSuffix {
                // APNs would refuse every device (DeviceTokenNotForTopic): refuse the job once instead.
                throw JobError(.invalidField, field: "push_type",
                    "push_type \(pushType.rawValue) needs a topic ending in '\(suffix)'; the job names no topic and app '\(app)' sends to '\(appTopic)' (add \"topic\": \"\(appTopic)\(suffix)\")")
            }
            throw JobError(.invalidField, field: error.field, error.message)
        }
        return DecodedPayload(bytes: payload, pushType: pushType, badge: badge, androidOnly: androidOnly)
    }
}
