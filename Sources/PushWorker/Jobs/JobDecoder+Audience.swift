import APNs
import FCM
import Foundation
import Stores

/// The job's `audience` section: whom it reaches, and for Live Activities which registry tokens.
extension JobDecoder {
    /// Which registry tokens the job reaches, and the audience rules of Live Activity jobs: a
    /// start reaches push-to-start tokens (of the users and groups named, or the tokens); an
    /// update or end reaches an activity's tokens, or a channel's subscribers through APNs.
    static func tokenNamespace(_ event: LiveActivityEvent?, audience: PushJob.Audience, chunkField: String?) throws(JobError) -> TokenNamespace {
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

    static let audienceFields: Set<String> = ["tokens", "users", "groups", "channel", "activity", "fcm_tokens"]
    /// Written by pushworker into chunk jobs only: the resolved recipients.
    static let chunkAudienceFields: Set<String> = ["devices", "filtered"]

    func decodeAudience(_ object: [String: Any]?, chunk: Bool) throws(JobError) -> PushJob.Audience {
        guard let object else { throw JobError(.missingField, field: "audience", "audience is missing") }
        // Looked for without a list of the keys made: found, the first in order is named.
        let isKnown = { (key: String) in Self.audienceFields.contains(key) || (chunk && Self.chunkAudienceFields.contains(key)) }
        if object.keys.contains(where: { !isKnown($0) }), let unknown = object.keys.filter({ !isKnown($0) }).sorted().first {
            if unknown == "devices" || unknown == "filtered" {
                throw JobError(.invalidField, field: "audience.\(unknown)", "audience.\(unknown) is written by pushworker into chunk jobs only; name tokens, users or groups")
            }
            throw JobError(.invalidField, field: "audience.\(unknown)", "audience.\(unknown) is not an audience field; expected tokens, fcm_tokens, users, groups, activity or channel")
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
            // The field's name is made on failure only: a broadcast's tokens all pass.
            do { try APNsDeviceToken.validate(token) } catch {
                let field = "audience.tokens[\(index)]"
                // Hex is never an FCM token, so only a token that is not one is asked (once per device of a broadcast otherwise).
                if FCMRegistrationToken.problem(token) == nil {
                    throw JobError(.invalidToken, field: field,
                        "\(field) is an FCM registration token (an Android device): name it in audience.fcm_tokens")
                }
                throw JobError(.invalidToken, field: field, "\(field): \(error.message)")
            }
        }
        let fcmTokens = try fields.strings("fcm_tokens") ?? []
        for (index, token) in fcmTokens.enumerated() {
            if let problem = FCMRegistrationToken.problem(token) {
                throw JobError(.invalidToken, field: "audience.fcm_tokens[\(index)]", "audience.fcm_tokens[\(index)] \(problem)")
            }
        }
        let users = try fields.strings("users") ?? [], groups = try fields.strings("groups") ?? []
        if !fcmTokens.isEmpty, activity != nil {
            throw JobError(.invalidField, field: "audience.activity",
                "audience.activity cannot go with audience.fcm_tokens: a Live Activity's tokens are APNs'")
        }
        for (field, names) in [("audience.users", users), ("audience.groups", groups)] {
            // No registry name has one, and PostgreSQL cannot even compare it.
            if let index = names.firstIndex(where: { $0.utf8.contains(0) }) {
                throw JobError(.invalidField, field: "\(field)[\(index)]", "\(field)[\(index)] contains a NUL character")
            }
        }
        var audience = PushJob.Audience(
            // Lower-case already: `normalized` made every token that passed as hex so.
            tokens: tokens, users: users, groups: groups,
            devices: try Self.pairs(object["devices"], field: "audience.devices"), filtered: try Self.pairs(object["filtered"], field: "audience.filtered"),
            activity: activity)
        // Case matters in a registration token: kept as sent; each once, in order.
        var seen = Set<String>()
        audience.fcmTokens = fcmTokens.filter { seen.insert($0).inserted }
        return audience
    }

    /// A chunk job's `[["<token>", "<user>" | null], …]`; an Android device's pair has a third
    /// element, `"fcm"`.
    static func pairs(_ value: Any?, field: String) throws(JobError) -> [Recipient] {
        guard let value, !JSONValue.isNull(value) else { return [] }
        guard let array = value as? [Any] else { throw JobError(.invalidField, field: field, "\(field) must be an array of [token, user] pairs") }
        var recipients: [Recipient] = []
        recipients.reserveCapacity(array.count)
        for (index, element) in array.enumerated() {
            // Made on failure only: a chunk job's pairs all pass.
            var name: String { "\(field)[\(index)]" }
            guard let pair = element as? [Any], pair.count == 2 || (pair.count == 3 && pair[2] as? String == DevicePlatform.fcm.rawValue),
                let token = pair[0] as? String, pair[1] is String || pair[1] is NSNull
            else {
                throw JobError(.invalidField, field: name, "\(name) must be a [token, user or null] pair (with \"fcm\" third for an Android device)")
            }
            if pair.count == 3 {
                if let problem = FCMRegistrationToken.problem(token) { throw JobError(.invalidToken, field: name, "\(name) \(problem)") }
                recipients.append(Recipient(token: token, user: pair[1] as? String, platform: .fcm))
                continue
            }
            do { try APNsDeviceToken.validate(token) } catch {
                throw JobError(.invalidToken, field: name, "\(name): \(error.message)")
            }
            // Hex: `normalized` lower-cases it, and returns it as it is when it is so already.
            recipients.append(Recipient(token: APNsDeviceToken.normalized(token), user: pair[1] as? String))
        }
        return recipients
    }
}
