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
        let sent = try await Program.running(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":{"alert":"hi"}}"#,
            "--collapse-id", "c1", "--expiration", "+60", "--priority", "5"])
        #expect(sent.status == 0, "\(sent.standardError)")
        #expect(sent.standardOutput.contains("status: 200"))
        #expect(sent.standardOutput.contains("apns-id: "))
        let recorded = try #require(server.recorded.first)
        #expect(recorded.token == token && recorded.collapseID == "c1" && recorded.priority == "5")

        let rejected = try await Program.running(["send", "--config", config.path, "--app", "demo", "--token", gone, "--payload", #"{"aps":{}}"#])
        #expect(rejected.status == 1)
        #expect(rejected.standardOutput.contains("status: 410"))
        #expect(rejected.standardOutput.contains("reason: Unregistered"))
        #expect(rejected.standardOutput.contains("timestamp: 2023-11-14T22:13:20Z"))

        let invalid = try await Program.running(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":{}}"#, "--push-type", "toast"])
        #expect(invalid.status != 0)
        #expect(invalid.standardError.contains("unknown push type 'toast'"))
        let badJSON = try await Program.running(["send", "--config", config.path, "--token", token, "--payload", #"{"aps":"#])
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

        let sent = try await Program.running([
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

        let unregistered = try await Program.running(["send", "--config", config.path, "--platform", "fcm", "--token", gone, "--payload", #"{"fcm": {"data": {"a": "b"}}}"#])
        #expect(unregistered.status == 1 && unregistered.standardOutput.contains("reason: UNREGISTERED"), "\(unregistered.standardOutput)")
        // Each command is a fresh process, so each asks for its own grant; bad input asks for none.
        let granted = server.fcmGrants.issued
        let number = try await Program.running(["send", "--config", config.path, "--platform", "fcm", "--token", Self.android, "--payload", #"{"fcm": {"data": {"a": 1}}}"#])
        #expect(number.status != 0 && number.standardError.contains("fcm.data.a is not a string"), "\(number.standardError)")
        let apnsToken = try await Program.running([
            "send", "--config", config.path, "--platform", "fcm", "--token", String(repeating: "ab", count: 32), "--payload", #"{"fcm": {"data": {"a": "b"}}}"#,
        ])
        #expect(apnsToken.status != 0 && apnsToken.standardError.contains("--token is 64 hex digits: an APNs device token"), "\(apnsToken.standardError)")
        #expect(server.fcmMessages.count == 1 && granted >= 2 && server.fcmGrants.issued == granted)
        #expect(!sent.standardError.contains("PRIVATE KEY") && !sent.standardOutput.contains("PRIVATE KEY"))
    }

    @Test("send rides out a token endpoint that is briefly unwell, for three tries, then names why")
    func fcmTokenEndpointUnwell() async throws {
        // Four 503s: the first command's three tries, then the second command's first.
        let fixture = try await MockAPNsFixture.start { configuration in
            configuration.fcmAccounts = [MockAPNsFixture.fcmAccount]
            configuration.fcmTokenEndpointOutages = 4
        }
        let server = fixture.server
        defer { Task { try? await server.shutdown() } }
        let config = try MockAPNsFixture.writeConfiguration("apps:\n" + fixture.appYAML(extra: try fixture.fcmYAML()))
        let arguments = ["send", "--config", config.path, "--platform", "fcm", "--token", Self.android, "--payload", #"{"fcm": {"data": {"a": "b"}}}"#]

        let given = try await Program.running(arguments)
        #expect(given.status == 1 && given.standardError.contains("no FCM access token: token endpoint unreachable:") && given.standardError.contains("answered 503"),
            "\(given.standardError)")
        #expect(given.standardError.contains("asking again in 5 s (try 2 of 3)") && given.standardError.contains("(try 3 of 3)"), "\(given.standardError)")
        #expect(server.fcmMessages.isEmpty && server.fcmGrants.issued == 0)

        let rode = try await Program.running(arguments)
        #expect(rode.status == 0 && rode.standardOutput.contains("status: 200"), "\(rode.standardError)")
        #expect(rode.standardError.contains("(try 2 of 3)") && !rode.standardError.contains("try 3"), "\(rode.standardError)")
        #expect(server.fcmMessages.count == 1 && server.fcmGrants.issued == 1)
    }
}
