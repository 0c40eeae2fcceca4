import APNs
import Foundation
import MockAPNs
import TestSupport
import Testing

/// Every rule the mock enforces, exercised over real TLS and HTTP/2 with the curl command, which
/// (unlike our client) is happy to send requests that break the rules.
@Suite("Mock APNs validation rules")
struct MockValidationTests {
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        var method = "POST"
        var path = "/3/device/" + String(repeating: "ab", count: 32)
        var headers: [String] = ["apns-topic: com.example.app", "apns-push-type: alert"]
        var body = #"{"aps":{"alert":"hi"}}"#
        var authorization = true
        let status: Int
        let reason: String?
        var description: String { name }
    }

    static let cases: [Case] = [
        Case(name: "valid", status: 200, reason: nil),
        Case(name: "GET", method: "GET", status: 405, reason: "MethodNotAllowed"),
        Case(name: "bad path", path: "/2/device/abcd", status: 404, reason: "BadPath"),
        Case(name: "missing token", path: "/3/device/", status: 400, reason: "MissingDeviceToken"),
        Case(name: "bad token", path: "/3/device/xyz", status: 400, reason: "BadDeviceToken"),
        Case(name: "duplicate header", headers: ["apns-topic: com.example.app", "apns-priority: 10", "apns-priority: 5"], status: 400, reason: "DuplicateHeaders"),
        Case(name: "no provider token", authorization: false, status: 403, reason: "MissingProviderToken"),
        Case(name: "missing topic", headers: ["apns-push-type: alert"], status: 400, reason: "MissingTopic"),
        Case(name: "foreign topic", headers: ["apns-topic: com.other.app"], status: 400, reason: "TopicDisallowed"),
        Case(name: "unknown push type", headers: ["apns-topic: com.example.app", "apns-push-type: toast"], status: 400, reason: "InvalidPushType"),
        Case(name: "voip without .voip topic", headers: ["apns-topic: com.example.app", "apns-push-type: voip"], status: 400, reason: "InvalidPushType"),
        Case(name: "priority 7", headers: ["apns-topic: com.example.app", "apns-priority: 7"], status: 400, reason: "BadPriority"),
        Case(name: "background at 10", headers: ["apns-topic: com.example.app", "apns-push-type: background", "apns-priority: 10"], status: 400, reason: "BadPriority"),
        Case(name: "bad expiration", headers: ["apns-topic: com.example.app", "apns-expiration: tomorrow"], status: 400, reason: "BadExpirationDate"),
        Case(name: "long collapse id", headers: ["apns-topic: com.example.app", "apns-collapse-id: " + String(repeating: "c", count: 65)], status: 400, reason: "BadCollapseId"),
        Case(name: "bad apns-id", headers: ["apns-topic: com.example.app", "apns-id: 1234"], status: 400, reason: "BadMessageId"),
        Case(name: "empty payload", body: "", status: 400, reason: "PayloadEmpty"),
        Case(name: "payload too large", body: #"{"aps":{"alert":""# + String(repeating: "x", count: 4100) + #""}}"#, status: 413, reason: "PayloadTooLarge"),
        Case(name: "voip payload within 5120", headers: ["apns-topic: com.example.app.voip", "apns-push-type: voip"],
            body: #"{"aps":{},"x":""# + String(repeating: "x", count: 5000) + #""}"#, status: 200, reason: nil),
        Case(name: "payload not JSON", body: "{aps", status: 400, reason: "BadPayload"),
    ]

    static let stored = "c3RvcmVkLWNoYW5uZWwtMDE="
    static let unstored = "bm9uZS1jaGFubmVsLTAwMDE="
    static let broadcastPath = "/4/broadcasts/apps/com.example.app"
    static let liveActivity = #"{"aps":{"event":"update","content-state":{},"timestamp":1}}"#

    static func broadcast(_ name: String, headers: [String], body: String = liveActivity, status: Int, reason: String?) -> Case {
        Case(name: name, path: broadcastPath, headers: headers, body: body, status: status, reason: reason)
    }

    /// Broadcasts and channel management, against a mock with two channels (one storing the
    /// latest message, one storing nothing).
    static let channelCases: [Case] = [
        broadcast("broadcast", headers: ["apns-channel-id: \(stored)", "apns-push-type: liveactivity", "apns-expiration: 1900000000"], status: 200, reason: nil),
        Case(name: "broadcast GET", method: "GET", path: broadcastPath, headers: ["apns-channel-id: \(stored)", "apns-push-type: liveactivity"],
            status: 405, reason: "MethodNotAllowed"),
        broadcast("no channel id", headers: ["apns-push-type: liveactivity"], status: 400, reason: "MissingChannelId"),
        broadcast("channel id not base64", headers: ["apns-channel-id: abc!", "apns-push-type: liveactivity"], status: 400, reason: "BadChannelId"),
        broadcast("unknown channel", headers: ["apns-channel-id: dW5rbm93bi1jaGFubmVsLTA=", "apns-push-type: liveactivity"],
            status: 400, reason: "ChannelNotRegistered"),
        broadcast("no push type", headers: ["apns-channel-id: \(stored)"], status: 400, reason: "MissingPushType"),
        broadcast("alert push type", headers: ["apns-channel-id: \(stored)", "apns-push-type: alert"], status: 400, reason: "InvalidPushType"),
        broadcast("priority 1", headers: ["apns-channel-id: \(stored)", "apns-push-type: liveactivity", "apns-priority: 1"], status: 400, reason: "BadPriority"),
        broadcast("expiration on a channel storing nothing", headers: ["apns-channel-id: \(unstored)", "apns-push-type: liveactivity", "apns-expiration: 1900000000"],
            status: 400, reason: "BadExpirationDate"),
        broadcast("expiration 0 on a channel storing nothing", headers: ["apns-channel-id: \(unstored)", "apns-push-type: liveactivity", "apns-expiration: 0"],
            status: 200, reason: nil),
        broadcast("broadcast payload within 5120", headers: ["apns-channel-id: \(stored)", "apns-push-type: liveactivity"],
            body: #"{"aps":{},"x":""# + String(repeating: "x", count: 5000) + #""}"#, status: 200, reason: nil),
        broadcast("broadcast payload too large", headers: ["apns-channel-id: \(stored)", "apns-push-type: liveactivity"],
            body: #"{"aps":{},"x":""# + String(repeating: "x", count: 5120) + #""}"#, status: 413, reason: "PayloadTooLarge"),
        Case(name: "broadcast for a foreign app", path: "/4/broadcasts/apps/com.other.app", headers: ["apns-channel-id: \(stored)", "apns-push-type: liveactivity"],
            body: liveActivity, status: 400, reason: "TopicDisallowed"),
        Case(name: "broadcast without a provider token", path: broadcastPath, headers: ["apns-channel-id: \(stored)", "apns-push-type: liveactivity"],
            body: liveActivity, authorization: false, status: 403, reason: "MissingProviderToken"),
        Case(name: "create", path: "/1/apps/com.example.app/channels", headers: [], body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#,
            status: 201, reason: nil),
        Case(name: "create, push type any case", path: "/1/apps/com.example.app/channels", headers: [],
            body: #"{"message-storage-policy":1,"push-type":"liveactivity"}"#, status: 201, reason: nil),
        Case(name: "create, policy 2", path: "/1/apps/com.example.app/channels", headers: [], body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#,
            status: 400, reason: "BadRequest"),
        Case(name: "create, alert", path: "/1/apps/com.example.app/channels", headers: [], body: #"{"message-storage-policy":1,"push-type":"alert"}"#,
            status: 400, reason: "InvalidPushType"),
        Case(name: "create, no push type", path: "/1/apps/com.example.app/channels", headers: [], body: #"{"message-storage-policy":1}"#,
            status: 400, reason: "MissingPushType"),
        Case(name: "read", method: "GET", path: "/1/apps/com.example.app/channels", headers: ["apns-channel-id: \(unstored)"], body: "", status: 200, reason: nil),
        Case(name: "read without an id", method: "GET", path: "/1/apps/com.example.app/channels", headers: [], body: "", status: 400, reason: "MissingChannelId"),
        Case(name: "read all", method: "GET", path: "/1/apps/com.example.app/all-channels", headers: [], body: "", status: 200, reason: nil),
        Case(name: "delete all", method: "DELETE", path: "/1/apps/com.example.app/all-channels", headers: [], body: "", status: 405, reason: "MethodNotAllowed"),
        Case(name: "PUT a channel", method: "PUT", path: "/1/apps/com.example.app/channels", headers: ["apns-channel-id: \(stored)"], body: "",
            status: 405, reason: "MethodNotAllowed"),
        Case(name: "delete", method: "DELETE", path: "/1/apps/com.example.app/channels", headers: ["apns-channel-id: \(stored)"], body: "", status: 204, reason: nil),
        Case(name: "delete an unknown channel", method: "DELETE", path: "/1/apps/com.example.app/channels", headers: ["apns-channel-id: dW5rbm93bi1jaGFubmVsLTA="],
            body: "", status: 400, reason: "ChannelNotRegistered"),
        Case(name: "unknown management path", method: "GET", path: "/1/apps/com.example.app/subscribers", headers: [], body: "", status: 404, reason: "BadPath"),
    ]

    @Test("each broadcast and channel management request is answered with APNs' status and reason", arguments: channelCases)
    func channelRule(_ testCase: Case) async throws {
        try await rule(testCase) {
            $0.channels = ["com.example.app": [Self.stored: .mostRecentMessageStored, Self.unstored: .noMessageStored]]
        }
    }

    @Test("each request is answered with APNs' status and reason", arguments: cases)
    func rule(_ testCase: Case) async throws {
        try await rule(testCase) { _ in }
    }

    private func rule(_ testCase: Case, _ change: (inout MockAPNsConfiguration) -> Void) async throws {
        let (pki, p8) = MockFixture.shared
        let key = try ES256Key.privateKey(pem: p8)
        let fixture = try await MockFixture.start(change)
        defer { Task { try? await fixture.server.shutdown() } }
        let jwt = try ProviderToken.sign(keyID: MockFixture.keyID, teamID: MockFixture.teamID, issuedAt: Date(), key: key).jwt
        var arguments = ["-s", "--http2", "--cacert", pki.appendingPathComponent("ca.pem").path, "-X", testCase.method,
            "-o", "-", "-w", "\n%{http_code} %{http_version}"]
        for header in testCase.headers { arguments += ["-H", header] }
        if testCase.authorization { arguments += ["-H", "authorization: bearer \(jwt)"] }
        if testCase.method == "POST" { arguments += ["--data-binary", "@-"] }
        arguments.append(fixture.server.url + testCase.path)

        let output = try await Self.curl(arguments, input: Data(testCase.body.utf8))
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        let statusLine = try #require(lines.last).split(separator: " ")
        #expect(statusLine.last == "2", "HTTP version \(statusLine)")
        #expect(Int(statusLine.first ?? "") == testCase.status, "\(output)")
        let body = lines.dropLast().joined(separator: "\n")
        if let reason = testCase.reason {
            #expect(body.contains("\"reason\":\"\(reason)\""), "\(body)")
        } else if testCase.path.hasPrefix("/1/") {
            #expect(body.isEmpty == (testCase.status != 200), "\(body)")
        } else {
            #expect(body.isEmpty)
            #expect(fixture.server.recorded.count + fixture.server.broadcasts.count == 1)
        }
    }

    static func curl(_ arguments: [String], input: Data) async throws -> String {
        try await Program.running(arguments, input: input, program: URL(fileURLWithPath: "/usr/bin/curl")).standardOutput
    }
}
