import FCM
import Foundation

/// The job's Android section: `notification` (shared with APNs: its alert when the job has no
/// `payload`) and `fcm` (FCM's own fields), checked against FCM's rules when read.
extension JobDecoder {
    static func decodeFCM(_ object: [String: Any], audience: PushJob.Audience, job: PushJob) throws(JobError) -> FCMMessage? {
        if !audience.fcmTokens.isEmpty {
            if job.liveActivity != nil {
                throw JobError(.invalidField, field: "audience.fcm_tokens", "audience.fcm_tokens cannot go with live_activity: Live Activities are APNs'")
            }
            if job.localTime != nil {
                throw JobError(.invalidField, field: "local_time", "local_time cannot go with audience.fcm_tokens in this version: explicit tokens have no zone of their own")
            }
        }
        guard object["notification"] != nil || object["fcm"] != nil else {
            // Without either, Android devices are shown the APNs alert's title and body.
            if !audience.fcmTokens.isEmpty, PushJob.message(fromAPNsPayload: job.payload) == nil {
                throw JobError(.missingField, field: "notification",
                    "audience.fcm_tokens needs what Android devices are shown: notification (title, body), fcm.data, or an alert in payload.aps")
            }
            return nil
        }
        let message: FCMMessage
        do {
            message = try FCMMessage(notification: object["notification"], fcm: object["fcm"])
            // `validate` reads the message as sent; the job's own options count as FCM would see them.
            var sent = job
            sent.fcm = message
            try (sent.fcmMessage() ?? message).validate()
        } catch {
            throw JobError(.invalidField, field: error.field, "\(error.field) \(error.message)")
        }
        return message
    }

    /// APNs' alert for a job that names a `notification` and no `payload`.
    static func alertPayload(from notification: Any?) -> [String: Any]? {
        guard let fields = notification as? [String: Any] else { return nil }
        var alert: [String: Any] = [:]
        if let title = fields["title"] as? String { alert["title"] = title }
        if let body = fields["body"] as? String { alert["body"] = body }
        // Nothing an iPhone could show: no alert is made, and the job needs a payload of its own.
        return alert.isEmpty ? nil : ["aps": ["alert": alert]]
    }
}
