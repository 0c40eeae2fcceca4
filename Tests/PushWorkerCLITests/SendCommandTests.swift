import APNs
import Foundation
import MockAPNs
import TestSupport
import Testing

@Suite("pushworker send")
struct SendCommandTests {
    @Test("sends one notification through the configured app and prints the answer; a rejection exits 1")
    func sendsAndReports() async throws {
        let gone = String(repeating: "dd", count: 32)
        let fixture = try await MockAPNsFixture.start { $0.unregisteredTokens = [gone: Date(timeIntervalSince1970: 1_700_000_000)] }
        let server = fixture.server
        defer { Task { try? await server.shutdown() } }
        let config = try MockAPNsFixture.writeConfiguration("apps:\n" + fixture.appYAML())

        let token = String(repeating: "ab", count: 32)
        let sent = try Program.run(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":{"alert":"hi"}}"#,
            "--collapse-id", "c1", "--expiration", "+60", "--priority", "5"])
        #expect(sent.status == 0, "\(sent.standardError)")
        #expect(sent.standardOutput.contains("status: 200"))
        #expect(sent.standardOutput.contains("apns-id: "))
        let recorded = try #require(server.recorded.first)
        #expect(recorded.token == token && recorded.collapseID == "c1" && recorded.priority == "5")

        let rejected = try Program.run(["send", "--config", config.path, "--app", "demo", "--token", gone, "--payload", #"{"aps":{}}"#])
        #expect(rejected.status == 1)
        #expect(rejected.standardOutput.contains("status: 410"))
        #expect(rejected.standardOutput.contains("reason: Unregistered"))
        #expect(rejected.standardOutput.contains("timestamp: 2023-11-14T22:13:20Z"))

        let invalid = try Program.run(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":{}}"#, "--push-type", "toast"])
        #expect(invalid.status != 0)
        #expect(invalid.standardError.contains("unknown push type 'toast'"))
        let badJSON = try Program.run(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":"#])
        #expect(badJSON.standardError.contains("the payload is not valid JSON at line 1, column 8"), "\(badJSON.standardError)")
        #expect(server.requestCount == 2)
    }
}

@Suite("pushworker send --platform fcm")
struct SendFCMCommandTests {
    static let android = "cXyZ0123456789abcdefgh:APA91bH" + String(repeating: "k7-_Qw", count: 22)

    @Test("one message to an Android token through the app's fcm side: FCM's name printed; UNREGISTERED and a bad field exit 1")
    func sendsToFCM() async throws {
        let gone = "gone0123456789abcdefgh:APA91bH" + String(repeating: "x", count: 120)
        let fixture = try await MockAPNsFixture.start { configuration in
            configuration.fcmAccounts = [MockAPNsFixture.fcmAccount]
            configuration.fcmUnregisteredTokens = [gone]
        }
        let server = fixture.server
        defer { Task { try? await server.shutdown() } }
        let config = try MockAPNsFixture.writeConfiguration("apps:\n" + fixture.appYAML(extra: try fixture.fcmYAML()))

        let sent = try Program.run([
            "send", "--config", config.path, "--platform", "fcm", "--token", Self.android, "--priority", "10", "--expiration", "+600",
            "--collapse-id", "score", "--payload", #"{"notification": {"title": "Goal", "body": "2-1"}, "fcm": {"data": {"match": "7"}}}"#,
        ])
        #expect(sent.status == 0, "\(sent.standardError)")
        #expect(sent.standardOutput.contains("status: 200") && sent.standardOutput.contains("name: projects/\(TestServiceAccount.projectID)/messages/"))
        let recorded = try #require(server.fcmMessages.first)
        let message = try #require((try JSONSerialization.jsonObject(with: Data(recorded.message)) as? [String: Any])?["message"] as? [String: Any])
        #expect(message["token"] as? String == Self.android)
        #expect(message["notification"] as? [String: String] == ["title": "Goal", "body": "2-1"] && message["data"] as? [String: String] == ["match": "7"])
        let android = try #require(message["android"] as? [String: Any])
        #expect(android["priority"] as? String == "high" && android["collapse_key"] as? String == "score")
        let ttl = Int((android["ttl"] as? String ?? "").dropLast()) ?? -1
        #expect((590...600).contains(ttl), "ttl \(android["ttl"] ?? "none")")

        let unregistered = try Program.run(["send", "--config", config.path, "--platform", "fcm", "--token", gone, "--payload", #"{"fcm": {"data": {"a": "b"}}}"#])
        #expect(unregistered.status == 1 && unregistered.standardOutput.contains("reason: UNREGISTERED"), "\(unregistered.standardOutput)")
        let number = try Program.run(["send", "--config", config.path, "--platform", "fcm", "--token", Self.android, "--payload", #"{"fcm": {"data": {"a": 1}}}"#])
        #expect(number.status != 0 && number.standardError.contains("fcm.data.a is not a string"), "\(number.standardError)")
        let apnsToken = try Program.run([
            "send", "--config", config.path, "--platform", "fcm", "--token", String(repeating: "ab", count: 32), "--payload", #"{"fcm": {"data": {"a": "b"}}}"#,
        ])
        #expect(apnsToken.status != 0 && apnsToken.standardError.contains("--token is 64 hex digits: an APNs device token"), "\(apnsToken.standardError)")
        #expect(server.fcmMessages.count == 1 && server.fcmGrants.issued == 2)
        #expect(!sent.standardError.contains("PRIVATE KEY") && !sent.standardOutput.contains("PRIVATE KEY"))
    }
}
