import FCM
import Foundation
import Synchronization

/// A job's FCM message, encoded once for all its Android devices: encoding is a
/// `JSONSerialization` with sorted keys, which per batch (the slots free at a moment, a few
/// devices) cost an Android device more than its own request. Encoded again only when the `ttl`
/// left of the job's expiration has moved on by a second; made at the first Android device, so a
/// job for iPhones alone pays nothing for it.
final class FCMJobMessage: Sendable {
    private struct State {
        /// The message without the `ttl` taken from the expiration (nil inside: nothing to show).
        var message: FCMMessage??
        var last: (ttl: Int?, encoded: FCMMessage.Encoded)?
    }

    private let job: PushJob
    private let state = Mutex(State())

    init(_ job: PushJob) {
        self.job = job
    }

    /// The message as sent at `now`; nil when the job has nothing to show Android devices.
    func encoded(now: Date = Date()) -> FCMMessage.Encoded? {
        state.withLock { state in
            if state.message == nil { state.message = .some(job.fcmMessageWithoutTTL()) }
            guard case .some(.some(var message)) = state.message else { return nil }
            let ttl = job.fcmTTL(message.ttl, now: now)
            if let last = state.last, last.ttl == ttl { return last.encoded }
            message.ttl = ttl
            let encoded = message.encoded()
            state.last = (ttl, encoded)
            return encoded
        }
    }
}
