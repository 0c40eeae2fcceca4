import APNs
import Foundation
import Registry

/// Turns a message body into a `PushJob`, or a `JobError` that names the field. Every rule of the
/// job contract is checked here, before anything is resolved or sent.
public struct JobDecoder: Sendable {
    /// The configured apps by name, each with its default topic (bundle id): a push type that
    /// needs a topic suffix is checked against the topic the job will really be sent with.
    public var apps: [String: String]
    /// Per app, the expiration of jobs that name none (`apps[].default_expiration`).
    public var defaultExpirations: [String: DefaultExpiration]
    /// Per app, the results mode of jobs that name none (`apps[].default_results`); else `all`.
    public var defaultResults: [String: PushJob.ResultsMode]

    public init(apps: [String: String], defaultExpirations: [String: DefaultExpiration] = [:], defaultResults: [String: PushJob.ResultsMode] = [:]) {
        self.apps = apps
        self.defaultExpirations = defaultExpirations
        self.defaultResults = defaultResults
    }

    /// Known top-level fields; anything else is refused, so a misspelt option (`colapse_id`)
    /// is an error instead of being silently ignored.
    static let fields: Set<String> = [
        "id", "app", "audience", "type", "subtype", "payload", "push_type", "priority", "expiration",
        "collapse_id", "topic", "results", "reply_to", "live_activity", "idempotency_key", "send_at", "quiet_hours", "local_time",
    ]
    /// Written by pushworker into chunk and retry jobs only: where their tokens live in the registry.
    static let chunkFields: Set<String> = ["token_namespace"]

    /// - Parameters:
    ///   - messageID: the AMQP message_id, the default job id.
    ///   - enqueuedAt: when the job was published (AMQP timestamp), for relative expirations.
    ///   - chunk: the body is a chunk or retry job a worker published (`x-pushworker-chunk`): its
    ///     audience may carry resolved `devices` and `filtered` pairs, which a producer's may not.
    public func decode(_ body: [UInt8], messageID: String? = nil, enqueuedAt: Date = Date(), chunk: Bool = false) throws(JobError) -> PushJob {
        let object: [String: Any]
        do {
            guard let parsed = try JSONDocument.parse(body) as? [String: Any] else {
                throw JobError(.invalidJSON, field: nil, "the job must be a JSON object")
            }
            object = parsed
        } catch let error as JobError {
            throw error
        } catch {
            throw JobError(.invalidJSON, field: nil, "the job is \(error)")
        }
        var fields = JobFields(object)

        if let unknown = object.keys.filter({ !Self.fields.contains($0) && !(chunk && Self.chunkFields.contains($0)) }).sorted().first {
            throw JobError(.invalidField, field: unknown, "\(unknown) is not a job field (misspelt?)")
        }
        let id = try fields.string("id") ?? messageID ?? UUID().uuidString.lowercased()
        guard !id.isEmpty else { throw JobError(.invalidField, field: "id", "id is empty") }

        let app: String
        let appTopic: String
        if let named = try fields.string("app") {
            guard let topic = apps[named] else {
                throw JobError(.unknownApp, field: "app", "app '\(named)' is not configured (configured: \(apps.keys.sorted().joined(separator: ", ")))")
            }
            (app, appTopic) = (named, topic)
        } else if apps.count == 1, let only = apps.first {
            (app, appTopic) = only
        } else {
            throw JobError(.unknownApp, field: "app", "app is required when several apps are configured (\(apps.keys.sorted().joined(separator: ", ")))")
        }

        let audience = try decodeAudience(fields.object("audience"), chunk: chunk)
        var namedPushType: APNsPushType?
        if let text = try fields.string("push_type") {
            do { namedPushType = try APNsPushType(validating: text) } catch { throw JobError(.invalidField, field: "push_type", "push_type: \(error.message)") }
        }
        var priority: APNsPriority?
        if let value = try fields.integer("priority") {
            do { priority = try APNsPriority(validating: value) } catch { throw JobError(.invalidField, field: "priority", "priority: \(error.message)") }
        }
        let liveActivity = try fields.object("live_activity").map { object throws(JobError) in try LiveActivity(object, enqueuedAt: enqueuedAt) }
        let tokenNamespace = try Self.tokenNamespace(liveActivity?.event, audience: audience, chunkField: chunk ? fields.string("token_namespace") : nil)
        if liveActivity != nil || audience.channel != nil {
            if let namedPushType, namedPushType != .liveactivity {
                let cause = liveActivity != nil ? "a job with live_activity" : "a broadcast (audience.channel)"
                throw JobError(.invalidField, field: "push_type", "push_type is \(namedPushType.rawValue), but \(cause) is sent as liveactivity (leave push_type out)")
            }
            namedPushType = .liveactivity
            if let priority, priority == .low {
                throw JobError(.invalidField, field: "priority", "priority 1 is not one APNs accepts for Live Activities; use 5 (routine) or 10 (the user is waiting)")
            }
            priority = priority ?? liveActivity?.defaultPriority
        }
        let expiration = try decodeExpiration(object["expiration"], enqueuedAt: enqueuedAt)
            ?? defaultExpirations[app]?.expiration(since: enqueuedAt)
        let collapseID = try fields.string("collapse_id")
        var topic = try fields.string("topic")
        if namedPushType == .liveactivity, topic == nil, liveActivity != nil || audience.channel != nil,
            let suffix = APNsPushType.liveactivity.requiredTopicSuffix, !appTopic.hasSuffix(suffix)
        {
            // Written out, so chunk and retry jobs carry the topic the decoder chose.
            topic = appTopic + suffix
        }
        if audience.channel != nil, collapseID != nil {
            throw JobError(.invalidField, field: "collapse_id", "collapse_id does not apply to a broadcast: APNs takes none on a channel")
        }
        var results = defaultResults[app] ?? .all
        if let text = try fields.string("results") {
            guard let mode = PushJob.ResultsMode(rawValue: text) else {
                throw JobError(.invalidField, field: "results", "results '\(text)' is not all, batched, failures or none")
            }
            results = mode
        }
        let replyTo = try fields.string("reply_to")
        if let replyTo, replyTo.isEmpty { throw JobError(.invalidField, field: "reply_to", "reply_to is empty") }
        if let replyTo, replyTo.utf8.count > 255 {
            throw JobError(.invalidField, field: "reply_to", "reply_to is \(replyTo.utf8.count) bytes; AMQP queue names have at most 255")
        }

        var payloadDictionary: [String: Any]
        if let liveActivity {
            // The app's own keys may ride along; `aps` is the worker's to build.
            payloadDictionary = try fields.object("payload") ?? [:]
            if payloadDictionary["aps"] != nil {
                throw JobError(.invalidField, field: "payload.aps",
                    "payload.aps is built from live_activity; move its fields there (payload may carry the app's own keys only)")
            }
            payloadDictionary["aps"] = liveActivity.aps
        } else {
            guard let payloadObject = object["payload"] else { throw JobError(.missingField, field: "payload", "payload is missing") }
            guard let dictionary = payloadObject as? [String: Any] else {
                throw JobError(.invalidField, field: "payload", "payload must be a JSON object, such as {\"aps\": {\"alert\": \"…\"}}")
            }
            payloadDictionary = dictionary
        }
        let inferred = namedPushType == nil
        let pushType = namedPushType ?? PayloadRules.inferredPushType(payloadDictionary)
        try PayloadRules.check(payloadDictionary, pushType: pushType, inferred: inferred)
        if inferred && pushType == .background && priority == .immediate {
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
        // Keys sorted: the same job makes the same bytes in every worker and every chunk.
        guard let payload = JSONDocument.bytes(serialised) else {
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
            deviceToken: "", topic: topic ?? appTopic, pushType: pushType, priority: priority, expiration: expiration,
            collapseID: collapseID, payload: payload, channelID: audience.channel)
        do {
            try notification.validateNotification()
        } catch {
            if error.field == "payload" && payload.count > (audience.channel == nil ? pushType.payloadLimit : APNsRequest.broadcastPayloadLimit) {
                throw JobError(.payloadTooLarge, field: "payload", error.message)
            }
            if error.field == "topic" && topic == nil, let suffix = pushType.requiredTopicSuffix {
                // APNs would refuse every device (DeviceTokenNotForTopic): refuse the job once instead.
                throw JobError(.invalidField, field: "push_type",
                    "push_type \(pushType.rawValue) needs a topic ending in '\(suffix)'; the job names no topic and app '\(app)' sends to '\(appTopic)' (add \"topic\": \"\(appTopic)\(suffix)\")")
            }
            throw JobError(.invalidField, field: error.field, error.message)
        }

        let idempotencyKey = try fields.string("idempotency_key")
        if let idempotencyKey, idempotencyKey.isEmpty || idempotencyKey.utf8.count > 255 || idempotencyKey.utf8.contains(0) {
            throw JobError(.invalidField, field: "idempotency_key", "idempotency_key must be 1 to 255 bytes, without NUL")
        }
        var job = PushJob(
            id: id, app: app, audience: audience, type: try fields.string("type"), subtype: try fields.string("subtype"),
            payload: payload, pushType: pushType, priority: priority, expiration: expiration, collapseID: collapseID,
            topic: topic, results: results, replyTo: replyTo, badge: badge)
        job.liveActivity = liveActivity?.event
        job.tokenNamespace = tokenNamespace
        job.idempotencyKey = idempotencyKey
        job.sendAt = try Self.sendAt(object["send_at"])
        if let text = try fields.string("local_time") {
            job.localTime = try LocalTime(text)
            guard job.sendAt == nil else {
                throw JobError(.invalidField, field: "local_time", "local_time and send_at exclude each other: local_time sends at a wall-clock time in each device's zone, send_at at one instant for all")
            }
            guard job.audience.channel == nil else {
                throw JobError(.invalidField, field: "local_time", "local_time needs devices to place in their zones; a broadcast to a channel has none (use send_at)")
            }
        }
        if let text = try fields.string("quiet_hours") {
            guard let mode = PushJob.QuietHoursMode(rawValue: text) else {
                throw JobError(.invalidField, field: "quiet_hours", "quiet_hours '\(text)' is not defer, drop or ignore")
            }
            job.quietHours = mode
        }
        return job
    }

    /// Which registry tokens the job reaches, and the audience rules of Live Activity jobs: a
    /// start reaches push-to-start tokens (of the users and groups named, or the tokens); an
    /// update or end reaches an activity's tokens, or a channel's subscribers through APNs.
    private static func tokenNamespace(_ event: LiveActivityEvent?, audience: PushJob.Audience, chunkField: String?) throws(JobError) -> TokenNamespace {
        if let chunkField {
            let parsed = TokenNamespace.parse("#" + chunkField).namespace
            guard parsed != .devices else { throw JobError(.invalidField, field: "token_namespace", "token_namespace '\(chunkField)' is not push-to-start or activity:<id>") }
            return parsed
        }
        if let channel = audience.channel {
            guard event != .start else {
                throw JobError(.invalidField, field: "audience.channel",
                    "audience.channel cannot start an activity: a start goes to push-to-start tokens (audience.users, groups or tokens); send it with input_push_channel to subscribe the new activity to the channel")
            }
            if let problem = channelIDProblem(channel) {
                throw JobError(.invalidField, field: "audience.channel", "audience.channel: \(problem)")
            }
            return .devices
        }
        guard let event else {
            if audience.activity != nil {
                throw JobError(.invalidField, field: "audience.activity", "audience.activity needs a live_activity object (event update or end)")
            }
            return .devices
        }
        switch event {
        case .start:
            if audience.activity != nil {
                throw JobError(.invalidField, field: "audience.activity",
                    "audience.activity cannot be started: a start reaches push-to-start tokens (audience.users, groups or tokens)")
            }
            return .pushToStart
        case .update, .end:
            if let field = audience.users.isEmpty ? (audience.groups.isEmpty ? nil : "groups") : "users" {
                throw JobError(.invalidField, field: "audience.\(field)",
                    "audience.\(field): an \(event.rawValue) reaches an activity's tokens, not a user's devices; name audience.activity (every token registered for it), audience.tokens or audience.channel")
            }
            return audience.activity.map { .activity($0) } ?? .devices
        }
    }

    /// Why `id` cannot be a broadcast channel id, as the client would refuse it; nil if it can.
    static func channelIDProblem(_ id: String) -> String? {
        do { try APNsChannel.validate(id: id) } catch { return error.message }
        return nil
    }

    private func decodeAudience(_ object: [String: Any]?, chunk: Bool) throws(JobError) -> PushJob.Audience {
        guard let object else { throw JobError(.missingField, field: "audience", "audience is missing") }
        let known = ["tokens", "users", "groups", "channel", "activity"] + (chunk ? ["devices", "filtered"] : [])
        if let unknown = object.keys.filter({ !known.contains($0) }).sorted().first {
            if unknown == "devices" || unknown == "filtered" {
                throw JobError(.invalidField, field: "audience.\(unknown)", "audience.\(unknown) is written by pushworker into chunk jobs only; name tokens, users or groups")
            }
            throw JobError(.invalidField, field: "audience.\(unknown)", "audience.\(unknown) is not an audience field; expected tokens, users, groups, activity or channel")
        }
        guard !object.isEmpty else {
            throw JobError(.emptyAudience, field: "audience", "audience names no tokens, users or groups")
        }
        var fields = JobFields(object, prefix: "audience.")
        let channel = try fields.string("channel")
        if let channel {
            if let other = object.keys.filter({ $0 != "channel" }).sorted().first {
                throw JobError(.invalidField, field: "audience.\(other)",
                    "audience.\(other) cannot go with audience.channel: a broadcast reaches the channel's subscribers, and APNs alone knows them")
            }
            return .channel(channel)
        }
        let activity = try fields.string("activity")
        if let activity, activity.isEmpty || activity.utf8.count > 128 || activity.utf8.contains(0) {
            throw JobError(.invalidField, field: "audience.activity", "audience.activity must be an activity id of 1 to 128 bytes, without NUL")
        }
        let tokens = (try fields.strings("tokens") ?? []).map(APNsDeviceToken.normalized)
        for (index, token) in tokens.enumerated() {
            do { try APNsDeviceToken.validate(token, field: "audience.tokens[\(index)]") } catch {
                throw JobError(.invalidToken, field: error.field, "\(error.field): \(error.message)")
            }
        }
        let users = try fields.strings("users") ?? [], groups = try fields.strings("groups") ?? []
        for (field, names) in [("audience.users", users), ("audience.groups", groups)] {
            // No registry name has one, and PostgreSQL cannot even compare it.
            if let index = names.firstIndex(where: { $0.utf8.contains(0) }) {
                throw JobError(.invalidField, field: "\(field)[\(index)]", "\(field)[\(index)] contains a NUL character")
            }
        }
        return PushJob.Audience(
            tokens: tokens.map { $0.lowercased() }, users: users, groups: groups,
            devices: try Self.pairs(object["devices"], field: "audience.devices"), filtered: try Self.pairs(object["filtered"], field: "audience.filtered"),
            activity: activity)
    }

    /// A chunk job's `[["<token>", "<user>" | null], …]`.
    private static func pairs(_ value: Any?, field: String) throws(JobError) -> [Recipient] {
        guard let value, !(value is NSNull) else { return [] }
        guard let array = value as? [Any] else { throw JobError(.invalidField, field: field, "\(field) must be an array of [token, user] pairs") }
        var recipients: [Recipient] = []
        recipients.reserveCapacity(array.count)
        for (index, element) in array.enumerated() {
            let name = "\(field)[\(index)]"
            guard let pair = element as? [Any], pair.count == 2, let token = pair[0] as? String, pair[1] is String || pair[1] is NSNull else {
                throw JobError(.invalidField, field: name, "\(name) must be a [token, user or null] pair")
            }
            do { try APNsDeviceToken.validate(token, field: name) } catch {
                throw JobError(.invalidToken, field: error.field, "\(error.field): \(error.message)")
            }
            recipients.append(Recipient(token: token.lowercased(), user: pair[1] as? String))
        }
        return recipients
    }

    /// What a refused body still says about itself, so its error summary names the job the
    /// producer published (`id`, `app`) and reaches the queue it reads (`reply_to`); each nil when
    /// the body is not an object, or the field is absent, empty or not a string.
    public struct Names: Sendable, Equatable {
        public var id: String?
        public var app: String?
        public var replyTo: String?

        public init(id: String? = nil, app: String? = nil, replyTo: String? = nil) {
            self.id = id
            self.app = app
            self.replyTo = replyTo
        }
    }

    /// The names a refused body gives itself (one parse for all three).
    public static func names(in body: [UInt8]) -> Names {
        guard let object = (try? JSONDocument.parse(body)) as? [String: Any] else { return Names() }
        func text(_ key: String) -> String? {
            guard let value = object[key] as? String, !value.isEmpty else { return nil }
            return value
        }
        return Names(id: text("id"), app: text("app"), replyTo: text("reply_to"))
    }

    /// `send_at`: an RFC 3339 time, or Unix seconds as `expiration` takes them (`RFC3339`'s one
    /// reading of a time, as `get_deliveries` and the command line use it).
    static func sendAt(_ value: Any?) throws(JobError) -> Date? {
        guard let value, !(value is NSNull) else { return nil }
        if let milliseconds = RFC3339.milliseconds(json: value) { return Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        switch value {
        case let text as String:
            throw JobError(.invalidField, field: "send_at", "send_at '\(text)' is not an RFC 3339 time (2026-11-27T09:00:00Z, or with an offset: 2026-11-27T09:00:00+01:00)")
        case let number as NSNumber where !JobFields.isBoolean(number):
            throw JobError(.invalidField, field: "send_at", "send_at \(number) is not a Unix time in whole seconds")
        default:
            throw JobError(.invalidField, field: "send_at", "send_at must be an RFC 3339 time (2026-11-27T09:00:00Z) or Unix seconds")
        }
    }

    /// `"immediate"` or 0, Unix seconds, an RFC 3339 string, or `{"after_seconds": N}`.
    private func decodeExpiration(_ value: Any?, enqueuedAt: Date) throws(JobError) -> APNsExpiration? {
        guard let value else { return nil }
        let field = "expiration"
        if let text = value as? String {
            if text == "immediate" { return .immediately }
            if let milliseconds = RFC3339.milliseconds(json: text) { return .at(Date(timeIntervalSince1970: Double(milliseconds) / 1000)) }
            throw JobError(.invalidField, field: field, "expiration '\(text)' is not \"immediate\" or an RFC 3339 time")
        }
        if let number = value as? NSNumber, !JobFields.isBoolean(number) {
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
            guard let number = raw as? NSNumber, !JobFields.isBoolean(number), number.doubleValue.isFinite,
                number.doubleValue >= 0, number.doubleValue <= 31_536_000, number.doubleValue == number.doubleValue.rounded()
            else {
                throw JobError(.invalidField, field: "expiration.after_seconds", "expiration.after_seconds must be whole seconds between 0 and 31536000")
            }
            return .after(.seconds(number.int64Value), since: enqueuedAt)
        }
        throw JobError(.invalidField, field: field, "expiration must be \"immediate\", Unix seconds, an RFC 3339 time or {\"after_seconds\": N}")
    }
}
