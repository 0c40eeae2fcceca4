import APNs
import FCM
import Foundation

extension PushJob {
    /// What the job's Android devices are sent now: its `notification` and `fcm`, with the job's
    /// own options where `fcm.android` names none: `priority` 10 is `high` and 5 `normal`, the
    /// `expiration` is the `ttl` left (0 for `immediate`), and `collapse_id` is `collapse_key`.
    public func fcmMessage(now: Date = Date()) -> FCMMessage? {
        guard var message = fcm else { return nil }
        if message.priority == nil, let priority { message.priority = priority == .immediate ? .high : .normal }
        if message.ttl == nil, let expiration {
            message.ttl = expiration.deadline.map { min(FCMMessage.maximumTTL, max(0, Int($0.timeIntervalSince(now).rounded(.up)))) } ?? 0
        }
        if message.collapseKey == nil { message.collapseKey = collapseID }
        return message
    }
}
