import APNs
import FCM
import Foundation

extension PushJob {
    /// What the job's Android devices are sent now: its `notification` and `fcm`, with the job's
    /// own options where `fcm.android` names none: `priority` 10 is `high` and 5 `normal`, the
    /// `expiration` is the `ttl` left (0 for `immediate`), and `collapse_id` is `collapse_key`.
    /// A job that names neither `notification` nor `fcm` reaches Android devices with its APNs
    /// alert's title and body (`payload.aps.alert`); nil when it has none either.
    public func fcmMessage(now: Date = Date()) -> FCMMessage? {
        guard var message = fcmMessageWithoutTTL() else { return nil }
        message.ttl = fcmTTL(message.ttl, now: now)
        return message
    }

    /// The message but for the `ttl` left of the job's expiration, which changes as it goes.
    func fcmMessageWithoutTTL() -> FCMMessage? {
        guard var message = fcm ?? Self.message(fromAPNsPayload: payload) else { return nil }
        if message.priority == nil, let priority { message.priority = priority == .immediate ? .high : .normal }
        if message.collapseKey == nil { message.collapseKey = collapseID }
        return message
    }

    /// `fcm.android.ttl` as the job named it, else what is left of its expiration at `now`, in
    /// whole seconds (0 for `immediate`).
    func fcmTTL(_ named: Int?, now: Date) -> Int? {
        if let named { return named }
        guard let expiration else { return nil }
        return expiration.deadline.map { min(FCMMessage.maximumTTL, max(0, Int($0.timeIntervalSince(now).rounded(.up)))) } ?? 0
    }
}

extension PushJob {
    /// The notification an APNs payload's `aps.alert` shows (a string is its body).
    static func message(fromAPNsPayload payload: [UInt8]) -> FCMMessage? {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any], let aps = object["aps"] as? [String: Any] else {
            return nil
        }
        switch aps["alert"] {
        case let text as String where !text.isEmpty:
            return FCMMessage(notification: .init(body: text))
        case let fields as [String: Any]:
            let title = fields["title"] as? String, body = fields["body"] as? String
            guard title != nil || body != nil else { return nil }
            return FCMMessage(notification: .init(title: title, body: body))
        default:
            return nil
        }
    }
}
