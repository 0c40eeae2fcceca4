import APNs
import Foundation
import Stores

/// A job's `live_activity` object: what a producer says about a Live Activity push, from which the
/// worker builds the `aps` dictionary ActivityKit reads. Producers name fields in the job's own
/// snake_case and never spell ActivityKit's keys (`content-state`, `stale-date`…), so a typo is a
/// refused field instead of an activity that silently never updates.
struct LiveActivity {
    typealias Event = LiveActivityEvent

    var event: Event
    /// The `aps` dictionary, built and checked.
    var aps: [String: Any]

    /// Known fields: anything else is refused naming it.
    static let fields: Set<String> = [
        "event", "content_state", "attributes_type", "attributes", "stale_date", "dismissal_date", "relevance_score",
        "timestamp", "alert", "input_push_token", "input_push_channel",
    ]
    /// Fields that only make sense when an activity starts: an update or end carrying one is a
    /// producer mixing up its events, which ActivityKit would ignore without a word.
    static let startOnly: Set<String> = ["attributes_type", "attributes", "input_push_token", "input_push_channel"]

    /// - Parameter enqueuedAt: the job's enqueue time, the `timestamp` of a job that names none:
    ///   a redelivered job keeps it, so ActivityKit does not take a replay for newer content.
    init(_ object: [String: Any], enqueuedAt: Date) throws(JobError) {
        if let unknown = object.keys.filter({ !Self.fields.contains($0) }).sorted().first {
            throw JobError(.invalidField, field: "live_activity.\(unknown)",
                "live_activity.\(unknown) is not a live_activity field; expected one of \(Self.fields.sorted().joined(separator: ", "))")
        }
        var fields = JobFields(object, prefix: "live_activity.")
        guard let name = try fields.string("event") else {
            throw JobError(.missingField, field: "live_activity.event", "live_activity.event is missing: start, update or end")
        }
        guard let event = Event(rawValue: name) else {
            throw JobError(.invalidField, field: "live_activity.event", "live_activity.event '\(name)' is not start, update or end")
        }
        self.event = event
        if event != .start, let field = Self.startOnly.intersection(object.keys).sorted().first {
            throw JobError(.invalidField, field: "live_activity.\(field)",
                "live_activity.\(field) belongs to a start; an \(event.rawValue) cannot change it (leave it out)")
        }
        var aps: [String: Any] = ["event": event.rawValue]
        if let state = try fields.object("content_state") {
            aps["content-state"] = state
        } else if event != .end {
            throw JobError(.missingField, field: "live_activity.content_state",
                "live_activity.content_state is missing: a\(event == .update ? "n" : "") \(event.rawValue) needs the activity's content (an object)")
        }
        if event == .start {
            guard let type = try fields.string("attributes_type"), !type.isEmpty else {
                throw JobError(.missingField, field: "live_activity.attributes_type",
                    "live_activity.attributes_type is missing: a start names the app's ActivityAttributes type, such as \"MatchAttributes\"")
            }
            guard let attributes = try fields.object("attributes") else {
                throw JobError(.missingField, field: "live_activity.attributes",
                    "live_activity.attributes is missing: a start needs the activity's static attributes (an object)")
            }
            aps["attributes-type"] = type
            aps["attributes"] = attributes
            if let value = object["input_push_token"], !JSONValue.isNull(value) {
                guard let number = JSONValue.number(value), JSONValue.isBoolean(number) else {
                    throw JobError(.invalidField, field: "live_activity.input_push_token", "live_activity.input_push_token must be true or false")
                }
                if number.boolValue { aps["input-push-token"] = 1 }
            }
            if let channel = try fields.string("input_push_channel") {
                if let problem = JobDecoder.channelIDProblem(channel) {
                    throw JobError(.invalidField, field: "live_activity.input_push_channel", "live_activity.input_push_channel: \(problem)")
                }
                aps["input-push-channel"] = channel
            }
            if aps["input-push-token"] != nil && aps["input-push-channel"] != nil {
                throw JobError(.invalidField, field: "live_activity.input_push_channel",
                    "live_activity.input_push_channel and input_push_token exclude each other: an activity is updated through its own token or through a channel")
            }
        }
        aps["timestamp"] = try Self.seconds(object["timestamp"], field: "timestamp") ?? Int64(enqueuedAt.timeIntervalSince1970.rounded(.down))
        if let stale = try Self.seconds(object["stale_date"], field: "stale_date") {
            guard event != .end else {
                throw JobError(.invalidField, field: "live_activity.stale_date",
                    "live_activity.stale_date does not apply to an end; use dismissal_date to say when the ended activity leaves the lock screen")
            }
            aps["stale-date"] = stale
        }
        if let dismissal = try Self.seconds(object["dismissal_date"], field: "dismissal_date") {
            guard event == .end else {
                throw JobError(.invalidField, field: "live_activity.dismissal_date",
                    "live_activity.dismissal_date belongs to an end; a\(event == .update ? "n" : "") \(event.rawValue) cannot dismiss the activity")
            }
            aps["dismissal-date"] = dismissal
        }
        if let value = object["relevance_score"], !JSONValue.isNull(value) {
            guard let number = JSONValue.number(value), !JSONValue.isBoolean(number), number.doubleValue.isFinite, number.doubleValue >= 0 else {
                throw JobError(.invalidField, field: "live_activity.relevance_score", "live_activity.relevance_score must be a number, 0 or more")
            }
            aps["relevance-score"] = number
        }
        if let value = object["alert"], !JSONValue.isNull(value) {
            aps["alert"] = try Self.alert(value)
        }
        self.aps = aps
    }

    /// The alert a start or update shows: `{title, body, sound}`, each text a string or a
    /// localized `{"loc-key": …, "loc-args": […]}` object, as ActivityKit takes them.
    private static func alert(_ value: Any) throws(JobError) -> [String: Any] {
        guard let alert = value as? [String: Any] else {
            throw JobError(.invalidField, field: "live_activity.alert", "live_activity.alert must be an object such as {\"title\": \"…\", \"body\": \"…\"}")
        }
        let known: Set<String> = ["title", "body", "sound"]
        if let unknown = alert.keys.filter({ !known.contains($0) }).sorted().first {
            throw JobError(.invalidField, field: "live_activity.alert.\(unknown)", "live_activity.alert.\(unknown) is not an alert field; expected title, body or sound")
        }
        guard alert["title"] != nil || alert["body"] != nil else {
            throw JobError(.missingField, field: "live_activity.alert.title", "live_activity.alert.title is missing: an alert needs a title or a body")
        }
        for key in ["title", "body"] {
            if let text = alert[key], !(text is String || text is [String: Any]) {
                throw JobError(.invalidField, field: "live_activity.alert.\(key)",
                    "live_activity.alert.\(key) must be a string or a localized {\"loc-key\": …} object")
            }
        }
        if let sound = alert["sound"], !(sound is String || sound is [String: Any]) {
            throw JobError(.invalidField, field: "live_activity.alert.sound", "live_activity.alert.sound must be a sound file name or a sound object")
        }
        return alert
    }

    /// Unix seconds, or an RFC 3339 time, as ActivityKit's dates are (whole seconds).
    private static func seconds(_ value: Any?, field: String) throws(JobError) -> Int64? {
        guard let value, !JSONValue.isNull(value) else { return nil }
        let name = "live_activity.\(field)"
        if let milliseconds = RFC3339.milliseconds(json: value) {
            // Whole seconds, rounded down as ActivityKit reads them (before 1970 too).
            let seconds = milliseconds / 1000
            return milliseconds % 1000 < 0 ? seconds - 1 : seconds
        }
        if let text = value as? String {
            throw JobError(.invalidField, field: name, "\(name) '\(text)' is not Unix seconds or an RFC 3339 time")
        }
        throw JobError(.invalidField, field: name, "\(name) must be Unix seconds (a whole number) or an RFC 3339 time")
    }

    /// The priority of a job that names none: a start or an end is what the user is waiting
    /// for; routine updates go at 5, which APNs does not count against the app's budget of
    /// high-priority Live Activity updates.
    var defaultPriority: APNsPriority {
        event == .update ? .conservePower : .immediate
    }
}

/// What a Live Activity push does to the activity.
public enum LiveActivityEvent: String, Sendable, Hashable, CaseIterable {
    /// Starts an activity on a device, through its push-to-start token (iOS 17.2).
    case start
    /// New content for a running activity.
    case update
    /// Ends it, with its final content.
    case end
}
