import FCM
import Foundation
import Testing

@Suite("FCM messages, tokens and errors")
struct FCMMessageTests {
    static let token = "cXyZ0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)

    @Test("a message is encoded once and a device's body is its token spliced in: FCM HTTP v1's JSON")
    func encodes() throws {
        let message = FCMMessage(
            notification: .init(title: "Order 7", body: "On its way \"today\"", image: "https://example.com/a.png"), data: ["order": "7", "kind": "shipped"],
            priority: .high, ttl: 3600, collapseKey: "order-7", channelID: "orders", directBootOK: true)
        try message.validate()
        let body = message.encoded().body(token: Self.token)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let sent = try #require(object["message"] as? [String: Any])
        #expect(sent["token"] as? String == Self.token)
        #expect(sent["notification"] as? [String: String] == ["title": "Order 7", "body": "On its way \"today\"", "image": "https://example.com/a.png"])
        #expect(sent["data"] as? [String: String] == ["order": "7", "kind": "shipped"])
        let android = try #require(sent["android"] as? [String: Any])
        #expect(android["priority"] as? String == "high" && android["ttl"] as? String == "3600s" && android["collapse_key"] as? String == "order-7")
        #expect(android["direct_boot_ok"] as? Bool == true && (android["notification"] as? [String: String]) == ["channel_id": "orders"])
        // Data only: no notification, no android block.
        let quiet = FCMMessage(data: ["k": "v"]).encoded().body(token: Self.token)
        #expect(String(decoding: quiet, as: UTF8.self) == #"{"message":{"token":"\#(Self.token)","data":{"k":"v"}}}"#)
    }

    @Test("FCM's rules are checked before sending, naming the field: reserved keys, ttl, image, empty message, 4,096 bytes")
    func rules() {
        func refusal(_ message: FCMMessage) -> FCMMessageError? {
            do {
                try message.validate()
                return nil
            } catch {
                return error
            }
        }
        #expect(refusal(FCMMessage(data: ["from": "x"]))?.field == "fcm.data.from")
        #expect(refusal(FCMMessage(data: ["message_type": "x"]))?.field == "fcm.data.message_type")
        #expect(refusal(FCMMessage(data: ["google.c.a": "x"]))?.field == "fcm.data.google.c.a")
        #expect(refusal(FCMMessage(data: ["gcm.notification.title": "x"]))?.field == "fcm.data.gcm.notification.title")
        #expect(refusal(FCMMessage(data: ["ok": "x"], ttl: 29 * 86_400))?.field == "fcm.android.ttl")
        #expect(refusal(FCMMessage(notification: .init(title: "t", image: "http://example.com/a.png")))?.field == "notification.image")
        #expect(refusal(FCMMessage())?.field == "notification")
        #expect(refusal(FCMMessage(data: ["big": String(repeating: "x", count: 4094)]))?.field == "fcm")
        #expect(refusal(FCMMessage(data: ["big": String(repeating: "x", count: 4093)])) == nil)
        #expect(refusal(FCMMessage(data: ["fromage": "ok", "googley": "ok"], ttl: 0)) == nil)
    }

    @Test("registration tokens: base64url with a colon (or a pre-2018 APA91b token); an APNs hex token or a cut one is refused")
    func tokens() {
        #expect(FCMRegistrationToken.problem(Self.token) == nil)
        #expect(FCMRegistrationToken.problem("APA91b" + String(repeating: "Ab1-_", count: 30)) == nil)
        #expect(FCMRegistrationToken.problem(String(repeating: "ab12", count: 16))?.contains("an APNs device token") == true)
        #expect(FCMRegistrationToken.problem(String(repeating: "ab1-", count: 16))?.contains("64 characters") == true)
        #expect(FCMRegistrationToken.problem(String(repeating: "ab12", count: 40))?.contains("colon") == true)
        #expect(FCMRegistrationToken.problem(String(Self.token.prefix(60)))?.contains("60 characters") == true)
        #expect(FCMRegistrationToken.problem(Self.token + " ")?.contains("base64url") == true)
    }

    @Test("FCM's errors as Google documents them: what each means for the device and the sender")
    func failures() {
        func failure(_ status: Int, _ body: String, retryAfter: String? = nil) -> FCMFailure {
            FCMFailure(status: status, retryAfter: retryAfter, body: Data(body.utf8))
        }
        func fcm(_ code: String, _ status: String, _ http: Int) -> String {
            #"{"error":{"code":\#(http),"message":"m","status":"\#(status)","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code)"}]}}"#
        }
        #expect(failure(404, fcm("UNREGISTERED", "NOT_FOUND", 404)) == .unregistered)
        #expect(failure(400, fcm("INVALID_ARGUMENT", "INVALID_ARGUMENT", 400)) == .invalidMessage(field: nil, "m"))
        let badToken = #"{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}]}}"#
        #expect(failure(400, badToken) == .invalidToken("The registration token is not a valid FCM registration token"))
        let badData = #"{"error":{"code":400,"message":"Invalid value at 'message.data[0].value' (TYPE_STRING), 7","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.data[0].value","description":"Invalid value at 'message.data[0].value' (TYPE_STRING), 7"}]}]}}"#
        #expect(failure(400, badData) == .invalidMessage(field: "message.data[0].value", "Invalid value at 'message.data[0].value' (TYPE_STRING), 7"))
        #expect(failure(403, fcm("SENDER_ID_MISMATCH", "PERMISSION_DENIED", 403)) == .senderIDMismatch)
        #expect(failure(429, fcm("QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED", 429), retryAfter: "5") == .quotaExceeded(retryAfter: 60))
        #expect(failure(429, fcm("QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED", 429), retryAfter: "120") == .quotaExceeded(retryAfter: 120))
        #expect(failure(503, fcm("UNAVAILABLE", "UNAVAILABLE", 503), retryAfter: "30") == .unavailable(retryAfter: 30))
        #expect(failure(500, fcm("INTERNAL", "INTERNAL", 500)) == .unavailable(retryAfter: nil))
        #expect(failure(401, fcm("THIRD_PARTY_AUTH_ERROR", "UNAUTHENTICATED", 401)) == .credentials(code: "THIRD_PARTY_AUTH_ERROR", "m"))
        #expect(failure(401, #"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#)
            == .credentials(code: "UNAUTHENTICATED", "Request had invalid authentication credentials."))
        // A proxy's page, not FCM's JSON: its status decides.
        #expect(failure(503, "<html>busy</html>") == .unavailable(retryAfter: nil))
        // Only FCM's own word condemns a device: a bare 404 (a gateway's wrong path) or 403 (a wrong
        // project_id, a missing role) is the app's trouble, not its devices'.
        #expect(failure(404, "") == .other(status: 404, code: "NOT_FOUND", "HTTP 404"))
        #expect(failure(404, #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND"}}"#)
            == .other(status: 404, code: "NOT_FOUND", "Requested entity was not found."))
        #expect(failure(403, #"{"error":{"code":403,"message":"Permission denied","status":"PERMISSION_DENIED"}}"#)
            == .credentials(code: "PERMISSION_DENIED", "Permission denied"))
        // An INVALID_ARGUMENT about the message, with an FcmError detail, is not the token's fault.
        #expect(failure(400, #"{"error":{"code":400,"message":"Android message is too big","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}"#)
            == .invalidMessage(field: nil, "Android message is too big"))
        // Retry-After: whole seconds only, at most a day; anything else is none, and never a crash.
        for garbage in ["inf", "nan", "1e400", "-5", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999999999"] {
            #expect(failure(503, fcm("UNAVAILABLE", "UNAVAILABLE", 503), retryAfter: garbage) == .unavailable(retryAfter: nil), "\(garbage)")
            _ = failure(429, fcm("QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED", 429), retryAfter: garbage).detail
        }
        #expect(failure(503, fcm("UNAVAILABLE", "UNAVAILABLE", 503), retryAfter: "999999") == .unavailable(retryAfter: 86_400))
        #expect(failure(418, "") == .other(status: 418, code: nil, "HTTP 418"))
        #expect(failure(502, "<html>bad gateway</html>") == .unavailable(retryAfter: nil))
        #expect(failure(429, "").isRetryable && !failure(404, "").isRetryable)
        #expect(failure(403, fcm("SENDER_ID_MISMATCH", "PERMISSION_DENIED", 403)).reason == "SENDER_ID_MISMATCH")
    }
}

@Suite("FCM message fields of a job")
struct FCMMessageFieldsTests {
    static func read(_ json: String) throws(FCMMessageError) -> FCMMessage {
        let object = try! JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: Any]
        return try FCMMessage(notification: object["notification"], fcm: object["fcm"])
    }

    @Test("a job's notification and fcm object become the message; every wrong field is named")
    func reads() throws {
        let message = try Self.read(#"""
            {"notification": {"title": "T", "body": "B", "image": "https://example.com/i.png"},
             "fcm": {"data": {"a": "1"}, "android": {"priority": "high", "ttl": 60, "collapse_key": "c", "direct_boot_ok": true,
                     "notification": {"channel_id": "news"}}}}
            """#)
        #expect(message == FCMMessage(
            notification: .init(title: "T", body: "B", image: "https://example.com/i.png"), data: ["a": "1"], priority: .high, ttl: 60,
            collapseKey: "c", channelID: "news", directBootOK: true))
        func field(_ json: String) -> String? {
            do {
                _ = try Self.read(json)
                return nil
            } catch {
                return error.field
            }
        }
        #expect(field(#"{"fcm": {"data": {"count": 7}}}"#) == "fcm.data.count")
        #expect(field(#"{"fcm": {"data": {"ok": true}}}"#) == "fcm.data.ok")
        #expect(field(#"{"fcm": {"android": {"priority": "urgent"}}}"#) == "fcm.android.priority")
        #expect(field(#"{"fcm": {"android": {"ttl": "60s"}}}"#) == "fcm.android.ttl")
        #expect(field(#"{"fcm": {"android": {"ttl": true}}}"#) == "fcm.android.ttl")
        #expect(field(#"{"fcm": {"android": {"notification": {"sound": "x"}}}}"#) == "fcm.android.notification.sound")
        #expect(field(#"{"fcm": {"apns": {}}}"#) == "fcm.apns")
        #expect(field(#"{"notification": {"title": 1}}"#) == "notification.title")
        #expect(field(#"{"notification": "hi"}"#) == "notification")
    }
}

@Suite("FCM answers")
struct FCMAnswerTests {
    @Test("the message name is read from FCM's answer, spaced or not; an answer that is not FCM's gives none")
    func name() {
        #expect(FCMMessage.name(inAnswer: Array(#"{"name":"projects/p/messages/0:1%2"}"#.utf8)) == "projects/p/messages/0:1%2")
        #expect(FCMMessage.name(inAnswer: Array("{\n  \"name\": \"projects/p/messages/9\"\n}\n".utf8)) == "projects/p/messages/9")
        #expect(FCMMessage.name(inAnswer: Array(#"{"other":"x"}"#.utf8)) == nil)
        #expect(FCMMessage.name(inAnswer: []) == nil)
        #expect(FCMMessage.name(inAnswer: Array(#"{"name":"unterminated"#.utf8)) == nil)
    }
}
