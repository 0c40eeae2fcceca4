import APNs
import Foundation
import Stores

/// The rules Apple documents for alert and background payloads, which APNs itself does not
/// enforce: it accepts such a push and then delivers it late, throttled, or not at all. A job
/// that breaks one is refused once, naming the key, instead of reaching every device useless.
enum PayloadRules {
    /// Keys that make a notification visible to the user: a background push may carry none.
    static let visibleKeys = ["alert", "sound", "badge"]

    /// The push type of a job that names none: a payload whose `aps` asks only for
    /// `content-available` is a background update, which APNs wants as `background` at priority 5;
    /// sent as an alert at 10 it may be dropped or count against the app's budget.
    static func inferredPushType(_ payload: [String: Any]) -> APNsPushType {
        guard let aps = payload["aps"] as? [String: Any], isOne(aps["content-available"]),
              !visibleKeys.contains(where: { aps[$0] != nil }) else { return .alert }
        return .background
    }

    /// - Parameter inferred: the job named no push type; the message then says the type was
    ///   inferred, so a producer sees why a rule for background pushes applies.
    static func check(_ payload: [String: Any], pushType: APNsPushType, inferred: Bool) throws(JobError) {
        guard pushType == .alert || pushType == .background else { return }
        guard let apsValue = payload["aps"] else {
            // Written for the error only: every valid job passes here.
            let described = inferred ? "a job with no push_type (sent as \(pushType.rawValue))" : "push_type \(pushType.rawValue)"
            throw JobError(.invalidPayload, field: "payload.aps",
                "payload.aps is missing: \(described) needs an aps object, such as {\"aps\": {\"alert\": \"…\"}} or {\"aps\": {\"content-available\": 1}}")
        }
        guard let aps = apsValue as? [String: Any] else {
            throw JobError(.invalidPayload, field: "payload.aps", "payload.aps must be a JSON object")
        }
        if pushType == .background, let key = visibleKeys.first(where: { aps[$0] != nil }) {
            throw JobError(.invalidPayload, field: "payload.aps.\(key)",
                "payload.aps.\(key): a background push cannot carry alert, sound or badge (APNs may not deliver it); send push_type alert, or drop the key")
        }
        if isOne(aps["mutable-content"]), aps["alert"] == nil {
            throw JobError(.invalidPayload, field: "payload.aps.mutable-content",
                "payload.aps.mutable-content is 1 but there is no aps.alert: the notification service extension runs only for an alert the user sees; add an alert, or drop mutable-content")
        }
    }

    /// `1` as APNs reads it; JSON `true` decodes to the same number.
    private static func isOne(_ value: Any?) -> Bool {
        guard let value else { return false }
        return JSONValue.number(value)?.intValue == 1
    }
}
