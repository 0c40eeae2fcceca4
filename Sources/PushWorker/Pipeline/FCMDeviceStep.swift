import FCM
import Foundation

/// What becomes of an Android device after FCM's answer, or the lack of one: the FCM side of
/// `DeviceStep`, a pure function of the answer and the attempts made. FCM's retryable answers
/// (`QUOTA_EXCEEDED`, `UNAVAILABLE`, `INTERNAL`, no answer) are sent again from this worker,
/// not before FCM's `Retry-After` (a minute at least after a quota error, as Google asks), until
/// the policy's attempts are spent. Past this worker's share of the attempts, or asked to wait
/// longer than the policy's longest pause, the device is handed on to a retry job, as an APNs
/// device is: its slot is not held through a long wait.
enum FCMDeviceStep: Equatable {
    /// The device's final outcome.
    case finish(Outcome)
    /// Send again after at least `after` (nil: the policy's pause).
    case retry(after: Duration?)
    /// A later round continues (a retry job), not before `pause` when FCM named one.
    case handOn(pause: Duration?)

    static func after(_ answer: FCMAnswer, attempts: Int, previousAttempts: Int = 0, policy: RetryPolicy) -> FCMDeviceStep {
        var pause: Duration?
        switch answer {
        case .accepted:
            return .finish(.delivered)
        case .failed(let failure):
            switch failure {
            case .quotaExceeded(let retryAfter): pause = .seconds(retryAfter)
            case .unavailable(let retryAfter): pause = retryAfter.map { .seconds($0) }
            // The app's credentials: no device of it can be reached until they are fixed.
            case .credentials: return .finish(.failed)
            default: return .finish(.rejected)
            }
        case .unanswered:
            break
        }
        guard attempts < policy.maxAttempts else { return .finish(.failed) }
        if attempts - previousAttempts >= policy.inProcessAttempts { return .handOn(pause: pause) }
        if let pause, pause > policy.maximumDelay { return .handOn(pause: pause) }
        return .retry(after: pause)
    }
}
