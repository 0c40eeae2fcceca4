import APNs
import FCM
import Foundation
@testable import PushWorker
import Testing

@Suite("Jobs for Android devices: audience.fcm_tokens, notification and fcm")
struct FCMJobTests {
    static let android = "cXyZ0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)
    static let decoder = JobDecoder(apps: ["demo": "com.example.app"])
    static let token = String(repeating: "ab", count: 32)

    static func decode(_ json: String) throws(JobError) -> PushJob {
        try decoder.decode(Array(json.utf8))
    }

    @Test("one job for both platforms: the notification is FCM's and, without a payload, APNs' alert; the job's options fill android's")
    func bothPlatforms() throws {
        let job = try Self.decode(#"""
            {"audience": {"tokens": ["\#(Self.token)"], "fcm_tokens": ["\#(Self.android)"]},
             "notification": {"title": "Goal", "body": "2-1"}, "fcm": {"data": {"match": "7"}},
             "priority": 10, "collapse_id": "score", "expiration": {"after_seconds": 600}}
            """#)
        #expect(job.audience.fcmTokens == [Self.android] && job.audience.tokens == [Self.token])
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(job.payload)) as? [String: Any])
        #expect((payload["aps"] as? [String: Any])?["alert"] as? [String: String] == ["title": "Goal", "body": "2-1"])
        let message = try #require(job.fcm)
        #expect(message.notification == .init(title: "Goal", body: "2-1") && message.data == ["match": "7"])
        // The job's options, as the message goes.
        let body = try #require(try JSONSerialization.jsonObject(with: Data(Self.sent(job))) as? [String: Any])
        let android = try #require((body["message"] as? [String: Any])?["android"] as? [String: Any])
        #expect(android["priority"] as? String == "high" && android["collapse_key"] as? String == "score")
        let ttl = Int((android["ttl"] as? String ?? "").dropLast()) ?? -1
        #expect((590...600).contains(ttl))
        // A payload of its own stays APNs'.
        let own = try Self.decode(#"{"audience": {"tokens": ["\#(Self.token)"], "fcm_tokens": ["\#(Self.android)"]}, "notification": {"title": "T"}, "payload": {"aps": {"alert": "own"}}}"#)
        #expect(String(decoding: own.payload, as: UTF8.self).contains("own"))
        // Each Android token once, in order.
        let twice = try Self.decode(#"{"audience": {"fcm_tokens": ["\#(Self.android)", "\#(Self.android)"]}, "notification": {"title": "T"}}"#)
        #expect(twice.audience.fcmTokens == [Self.android])
        // A payload alert alone is what Android devices show.
        let alerted = try Self.decode(#"{"audience": {"fcm_tokens": ["\#(Self.android)"]}, "payload": {"aps": {"alert": {"title": "A", "body": "B"}}}}"#)
        #expect(alerted.fcm == nil && alerted.fcmMessage()?.notification == .init(title: "A", body: "B"))
        // Android alone: no payload needed.
        let alone = try Self.decode(#"{"audience": {"fcm_tokens": ["\#(Self.android)"]}, "fcm": {"data": {"sync": "1"}}}"#)
        #expect(alone.fcm?.data == ["sync": "1"] && alone.audience.tokens.isEmpty)
    }

    @Test("what FCM or this version cannot take is refused naming the field")
    func refusals() {
        func refusal(_ json: String) -> JobError? {
            do {
                _ = try Self.decode(json)
                return nil
            } catch {
                return error
            }
        }
        let tokens = #""audience": {"fcm_tokens": ["\#(Self.android)"]}"#
        #expect(refusal("{\(tokens), \"payload\": {\"aps\": {}}}")?.field == "notification")
        #expect(refusal("{\(tokens), \"fcm\": {\"data\": {\"n\": 7}}}")?.field == "fcm.data.n")
        #expect(refusal("{\(tokens), \"fcm\": {\"data\": {\"google.x\": \"1\"}}}")?.field == "fcm.data.google.x")
        #expect(refusal("{\(tokens), \"notification\": {\"title\": \"t\", \"image\": \"http://x\"}}")?.field == "notification.image")
        let bad = refusal(#"{"audience": {"fcm_tokens": ["\#(Self.token)"]}, "notification": {"title": "t"}}"#)
        #expect(bad?.code == .invalidToken && bad?.field == "audience.fcm_tokens[0]" && bad?.message.contains("APNs device token") == true)
        #expect(refusal(#"{"audience": {"users": ["u"], "groups": ["g"], "fcm_tokens": ["\#(Self.android)"]}, "notification": {"title": "t"}}"#) == nil)
        #expect(refusal(#"{"audience": {"fcm_tokens": ["\#(Self.android)"]}, "notification": {"title": "t"}, "local_time": "09:00"}"#)?.field == "local_time")
        #expect(refusal(#"{"audience": {"tokens": ["\#(Self.token)"]}, "notification": {"title": "t"}, "fcm": {"webpush": {}}}"#)?.field == "fcm.webpush")
        // Checked whatever else the job names: a payload alert (which Android devices would show) changes nothing.
        #expect(refusal(#"{"audience": {"fcm_tokens": ["\#(Self.android)"]}, "payload": {"aps": {"alert": "hi"}}, "local_time": "09:00"}"#)?.field == "local_time")
        #expect(refusal(#"{"audience": {"fcm_tokens": ["\#(Self.android)"], "activity": "a"}, "live_activity": {"event": "end"}}"#)?.field == "audience.activity")
        // A notification with nothing to show is no alert for an iPhone: the payload is missing.
        #expect(refusal(#"{"audience": {"tokens": ["\#(Self.token)"]}, "notification": {"image": "https://example.com/i.png"}}"#)?.field == "payload")
        // No Android device: notification and fcm are still checked, and the APNs job goes as before.
        #expect(refusal(#"{"audience": {"tokens": ["\#(Self.token)"]}, "payload": {"aps": {}}, "fcm": {"data": {"n": 1}}}"#)?.field == "fcm.data.n")
    }

    /// The body the worker sends a device of `job` now.
    static func sent(_ job: PushJob) throws -> [UInt8] {
        try #require(job.fcmMessage()).encoded().body(token: android)
    }

    @Test("FCM's answers, step by step: retried after Retry-After within this worker's share, handed on past it or for a long wait, final otherwise")
    func steps() {
        let policy = RetryPolicy(maxAttempts: 4, inProcessAttempts: 2, initialDelay: .milliseconds(100), maximumDelay: .seconds(5))
        #expect(FCMDeviceStep.after(.accepted(name: "n"), attempts: 1, policy: policy) == .finish(.delivered))
        #expect(FCMDeviceStep.after(.failed(.unregistered), attempts: 1, policy: policy) == .finish(.rejected))
        #expect(FCMDeviceStep.after(.failed(.credentials(code: "THIRD_PARTY_AUTH_ERROR", "x")), attempts: 1, policy: policy) == .finish(.failed))
        #expect(FCMDeviceStep.after(.failed(.unavailable(retryAfter: 2)), attempts: 1, policy: policy) == .retry(after: .seconds(2)))
        #expect(FCMDeviceStep.after(.unanswered("reset"), attempts: 1, policy: policy) == .retry(after: nil))
        // This worker's share spent, or a wait past the longest pause: a retry job continues.
        #expect(FCMDeviceStep.after(.failed(.unavailable(retryAfter: nil)), attempts: 2, policy: policy) == .handOn(pause: nil))
        #expect(FCMDeviceStep.after(.failed(.quotaExceeded(retryAfter: 60)), attempts: 1, policy: policy) == .handOn(pause: .seconds(60)))
        // The retry job goes to the first round that pauses at least as long as FCM asked.
        let delays = [5000, 30000, 120000]
        #expect(RetryHandOff.round(after: 0, delays: delays, notBefore: nil) == (0, 5000))
        #expect(RetryHandOff.round(after: 0, delays: delays, notBefore: .seconds(60)) == (2, 120000))
        #expect(RetryHandOff.round(after: 1, delays: delays, notBefore: .seconds(20)) == (1, 30000))
        #expect(RetryHandOff.round(after: 0, delays: delays, notBefore: .seconds(600)) == (2, 120000))
        #expect(RetryHandOff.round(after: 5, delays: delays, notBefore: .seconds(1)) == (5, 120000))
        // A retry job's own share counts from its first attempt; the last attempt is final.
        #expect(FCMDeviceStep.after(.failed(.unavailable(retryAfter: nil)), attempts: 3, previousAttempts: 2, policy: policy) == .retry(after: nil))
        #expect(FCMDeviceStep.after(.failed(.unavailable(retryAfter: nil)), attempts: 4, previousAttempts: 2, policy: policy) == .finish(.failed))
    }

    @Test("chunk and retry jobs carry Android devices, their users, and the job's notification and fcm, read back as they were")
    func chunkRoundTrip() throws {
        let job = try Self.decode(#"""
            {"id": "c-1", "audience": {"tokens": ["\#(Self.token)"], "fcm_tokens": ["\#(Self.android)"]}, "notification": {"title": "T", "body": "B"},
             "fcm": {"data": {"k": "v"}, "android": {"ttl": 60, "notification": {"channel_id": "news"}}}, "priority": 5}
            """#)
        let devices = [Recipient(token: Self.token, user: "u-1"), Recipient(token: Self.android, user: "u-2", platform: .fcm)]
        let chunk = try Self.decoder.decode(try job.chunkBody(devices: devices), chunk: true)
        #expect(chunk.audience.devices == devices)
        #expect(chunk.fcm == job.fcm && chunk.fcmMessage()?.priority == .normal)
        // A malformed Android pair names itself.
        let bad = Array(#"{"audience": {"devices": [["\#(Self.token)", null, "fcm"]]}, "payload": {"aps": {}}}"#.utf8)
        #expect(throws: JobError.self) { try Self.decoder.decode(bad, chunk: true) }
    }
}
