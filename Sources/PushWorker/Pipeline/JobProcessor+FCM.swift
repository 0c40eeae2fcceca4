import APNs
import FCM
import FCMHTTP2
import Foundation
import Logging

/// The Android devices of a batch: the job's FCM message (encoded once per job), their first
/// attempt sent together, then each device on its own (retries, its result, its slot), as for
/// APNs. FCM's UNREGISTERED is a rejection with FCM's code as its reason.
extension JobProcessor {
    /// The reason of an Android device whose app has no `fcm:` side.
    static let fcmNotConfigured = "fcm_not_configured"
    /// The reason of an Android device of a job with nothing to show it: no `notification`, no
    /// `fcm`, and no APNs alert to take the title and body from.
    static let noAndroidMessage = "no_android_message"

    func deliverFCM(
        _ job: PushJob, to devices: [Recipient], message: FCMJobMessage, slots: DeviceAdmission.Slots, replyTo: String, ends: DeviceEnds
    ) async throws {
        guard let fcm, let encoded = message.encoded() else {
            let reason = fcm == nil ? Self.fcmNotConfigured : Self.noAndroidMessage
            for device in devices {
                let slot = SlotRelease(slots)
                defer { slot.releaseUnlessHandedOver() }
                let result = PushResult(of: device, jobID: job.id, app: appName, outcome: .failed, reason: reason, attempts: device.previousAttempts)
                try await report(result, of: job, to: replyTo, ends: ends, slot: slot)
                metrics.notification(app: appName, platform: .fcm, outcome: .failed, reason: reason)
                ends.record(.final(.failed))
            }
            return
        }
        // A device re-registered after this moment is not one FCM's answer can condemn.
        let sentAt = Date()
        let answers: [FCMClient.Reply]? = job.expiration?.hasPassed() == true ? nil : await fcm.replies(encoded, to: devices.map(\.token))
        try await withThrowingDiscardingTaskGroup { group in
            for (offset, device) in devices.enumerated() {
                group.addTask {
                    let slot = SlotRelease(slots)
                    defer { slot.releaseUnlessHandedOver() }
                    let end = try await self.deliverFCM(
                        job, to: device, message: message, through: fcm, firstAnswer: answers?[offset], sentAt: sentAt, replyTo: replyTo, ends: ends, slot: slot)
                    ends.record(end)
                }
            }
        }
    }

    /// One Android device: its first answer, retries while FCM says to, then its result.
    private func deliverFCM(
        _ job: PushJob, to device: Recipient, message: FCMJobMessage, through fcm: any FCMSending, firstAnswer: FCMClient.Reply?, sentAt: Date, replyTo: String,
        ends: DeviceEnds, slot: SlotRelease
    ) async throws -> DeviceEnd {
        var result = PushResult(jobID: job.id, token: device.token, user: device.user, app: appName, outcome: .failed, attempts: device.previousAttempts)
        result.platform = .fcm
        var first = firstAnswer
        var reasonLabel: String?
        var last: FCMAnswer?
        attempts: while true {
            if first == nil, let expiration = job.expiration, expiration.hasPassed() {
                result.outcome = .expired
                break
            }
            result.attempts += 1
            let reply: FCMClient.Reply
            if let given = first {
                first = nil
                reply = given
            } else {
                // Encoded again: the ttl is what is left of the expiration now.
                guard let encoded = message.encoded() else { break }
                reply = await fcm.replies(encoded, to: [device.token]).first ?? .init(.unanswered("no answer"))
            }
            // A request lost with its connection and sent again may have been delivered: each send
            // counts, as for APNs. One whose re-sends ran out counts the attempt once.
            let answer = reply.answer
            if case .unanswered = answer {} else { result.attempts += reply.resent }
            reasonLabel = result.record(answer)
            last = answer
            switch FCMDeviceStep.after(answer, attempts: result.attempts, previousAttempts: device.previousAttempts, policy: retry) {
            case .finish(let outcome):
                result.outcome = outcome
                break attempts
            case .handOn(let pause):
                var next = Recipient(token: device.token, user: device.user, previousAttempts: result.attempts, platform: .fcm)
                next.notBefore = pause
                return .handOn(next)
            case .retry(let after):
                let pause = max(after ?? .zero, retry.delay(afterAttempt: result.attempts))
                // A pause that outlasts the job's expiration would only hold the slot: expired now.
                if let deadline = job.expiration?.deadline, Date().addingTimeInterval(Double(pause.components.seconds)) >= deadline {
                    result.outcome = .expired
                    break attempts
                }
                logger.debug("retrying on FCM", metadata: [
                    "job": "\(job.id)", "token": "\(device.token.prefix(8))…", "attempt": "\(result.attempts)", "reason": "\(result.reason ?? "-")",
                    "pause_ms": "\(pause / .milliseconds(1))",
                ])
                try await Task.sleep(for: pause)
            }
        }
        // A device FCM calls gone leaves the registry, as after APNs' 410; a token FCM calls
        // malformed is marked invalid, as after BadDeviceToken.
        let fate: APNsErrorReason? = switch last {
        case .failed(.unregistered): .unregistered
        case .failed(.invalidToken): .badDeviceToken
        default: nil
        }
        if let fate, let feedback, await feedback.deviceRejected(app: job.registryApp, token: device.token, reason: fate, at: sentAt) {
            ends.removed.add(1, ordering: .relaxed)
        }
        if case .failed(.credentials(let code, let detail)) = last {
            logger.error("FCM refused the app's credentials; its Android devices are not reached until they are fixed", metadata: [
                "app": "\(appName)", "code": "\(code)", "detail": "\(detail)",
            ])
        }
        logger.debug("device done", metadata: [
            "job": "\(job.id)", "token": "\(device.token.prefix(8))…", "platform": "fcm", "outcome": "\(result.outcome.rawValue)",
            "reason": "\(result.reason ?? "-")", "attempts": "\(result.attempts)",
        ])
        try await report(result, of: job, to: replyTo, ends: ends, slot: slot)
        metrics.notification(app: appName, platform: .fcm, outcome: result.outcome, reason: reasonLabel)
        return .final(result.outcome)
    }
}
