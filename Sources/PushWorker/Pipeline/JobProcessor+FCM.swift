import FCM
import Foundation
import Logging

/// The Android devices of a batch: one FCM message encoded once for all of them, their first
/// attempt sent together, then each device on its own (retries, its result, its slot), as for
/// APNs. FCM's UNREGISTERED is a rejection with FCM's code as its reason.
extension JobProcessor {
    static let fcmNotConfigured = "fcm_not_configured"

    func deliverFCM(_ job: PushJob, to devices: [Recipient], slots: DeviceAdmission.Slots, replyTo: String, ends: DeviceEnds) async throws {
        guard let fcm, let message = job.fcmMessage() else {
            // The pipeline refuses such a job before it gets here; this keeps a device from hanging.
            for device in devices {
                let slot = SlotRelease(slots)
                defer { slot.releaseUnlessHandedOver() }
                var result = PushResult(
                    jobID: job.id, token: device.token, user: device.user, app: appName, outcome: .failed, reason: Self.fcmNotConfigured,
                    attempts: device.previousAttempts)
                result.platform = .fcm
                try await report(result, of: job, to: replyTo, ends: ends, slot: slot)
                metrics.notification(app: appName, outcome: .failed, reason: Self.fcmNotConfigured)
                ends.record(.final(.failed))
            }
            return
        }
        let encoded = message.encoded()
        let answers: [FCMAnswer]? = job.expiration?.hasPassed() == true ? nil : await fcm.send(encoded, to: devices.map(\.token))
        try await withThrowingDiscardingTaskGroup { group in
            for (offset, device) in devices.enumerated() {
                group.addTask {
                    let slot = SlotRelease(slots)
                    defer { slot.releaseUnlessHandedOver() }
                    let end = try await self.deliverFCM(
                        job, to: device, message: encoded, through: fcm, firstAnswer: answers?[offset], replyTo: replyTo, ends: ends, slot: slot)
                    ends.record(end)
                }
            }
        }
    }

    /// One Android device: its first answer, retries while FCM says to, then its result.
    private func deliverFCM(
        _ job: PushJob, to device: Recipient, message: FCMMessage.Encoded, through fcm: any FCMSending, firstAnswer: FCMAnswer?, replyTo: String,
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
            let answer: FCMAnswer
            if let given = first {
                first = nil
                answer = given
            } else {
                answer = await fcm.send(message, to: [device.token]).first ?? .unanswered("no answer")
            }
            reasonLabel = result.record(answer)
            last = answer
            switch FCMDeviceStep.after(answer, attempts: result.attempts, policy: retry) {
            case .finish(let outcome):
                result.outcome = outcome
                break attempts
            case .retry(let after):
                let pause = max(after ?? .zero, retry.delay(afterAttempt: result.attempts))
                logger.debug("retrying on FCM", metadata: [
                    "job": "\(job.id)", "token": "\(device.token.prefix(8))…", "attempt": "\(result.attempts)", "reason": "\(result.reason ?? "-")",
                    "pause_ms": "\(pause / .milliseconds(1))",
                ])
                try await Task.sleep(for: pause)
            }
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
        metrics.notification(app: appName, outcome: result.outcome, reason: reasonLabel)
        return .final(result.outcome)
    }
}
